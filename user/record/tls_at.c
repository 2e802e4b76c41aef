// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* Where OpenSSL's functions are probed: on an emulated instruction (a
 * single-stepped uprobe costs ten times as much, README "TLS"): the entry,
 * past endbr64, or a callee shared by SSL_read and SSL_read_ex; else
 * single-stepped. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <capstone/capstone.h>

#include "critpath_abi.h"
#include "record_tls_at.h"

/* How far into a function its first call is looked for */
#define SCAN_BYTES 256
#define SCAN_INSNS 48

static const char *const fn_names[TLS_FN_N] = {
    [TLS_FN_READ] = "SSL_read",
    [TLS_FN_READ_EX] = "SSL_read_ex",
    [TLS_FN_WRITE] = "SSL_write",
    [TLS_FN_WRITE_EX] = "SSL_write_ex",
    [TLS_FN_HANDSHAKE] = "SSL_do_handshake",
};

bool tls_at__emulated(const uint8_t *c, size_t n)
{
	if (!n)
		return false;
	if (c[0] >= 0x50 && c[0] <= 0x57) /* push %rax .. %rdi */
		return true;
	if (n >= 2 && c[0] == 0x41 && c[1] >= 0x50 && c[1] <= 0x57) /* push %r8 .. %r15 */
		return true;
	if (c[0] >= 0x70 && c[0] <= 0x7f) /* jcc rel8 */
		return true;
	if (n >= 2 && c[0] == 0x0f && c[1] >= 0x80 && c[1] <= 0x8f) /* jcc rel32 */
		return true;
	/* nopl (0f 1f /0), compilers' loop padding: emulated */
	if (n >= 3 && c[0] == 0x0f && c[1] == 0x1f && !((c[2] >> 3) & 7))
		return true;
	return c[0] == 0xe8 || c[0] == 0xe9 || c[0] == 0xeb || c[0] == 0x90;
}

static bool is_endbr64(const uint8_t *c, size_t n)
{
	return n >= 4 && c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa;
}

static uint64_t cheap_entry(const struct tls_image *img, uint64_t addr)
{
	uint8_t c[8];
	int n = img->read(img->arg, addr, c, sizeof(c));

	if (n <= 0)
		return 0;
	if (tls_at__emulated(c, (size_t)n))
		return addr;
	if (is_endbr64(c, (size_t)n) && tls_at__emulated(c + 4, (size_t)n - 4))
		return addr + 4;
	return 0;
}

/* Whether insn writes one of the first four argument registers. */
static bool writes_args(csh cs, const cs_insn *insn)
{
	static const uint16_t args[] = {
	    X86_REG_RDI, X86_REG_EDI, X86_REG_DI,  X86_REG_DIL, X86_REG_RSI, X86_REG_ESI,
	    X86_REG_SI,	 X86_REG_SIL, X86_REG_RDX, X86_REG_EDX, X86_REG_DX,  X86_REG_DL,
	    X86_REG_DH,	 X86_REG_RCX, X86_REG_ECX, X86_REG_CX,	X86_REG_CL,  X86_REG_CH,
	};
	cs_regs rd, wr;
	uint8_t nrd = 0, nwr = 0;

	if (cs_regs_access(cs, insn, rd, &nrd, wr, &nwr) != CS_ERR_OK)
		return true; /* not known: as if it did */
	for (int i = 0; i < nwr; i++)
		for (size_t j = 0; j < sizeof(args) / sizeof(args[0]); j++)
			if (wr[i] == args[j])
				return true;
	return false;
}

static uint64_t first_call(csh cs, cs_insn *insn, const struct tls_image *img, uint64_t addr,
			   bool args_kept)
{
	uint8_t buf[SCAN_BYTES];
	const uint8_t *code = buf;
	int n = img->read(img->arg, addr, buf, sizeof(buf));
	size_t left = n > 0 ? (size_t)n : 0;
	uint64_t at = addr;

	for (int i = 0; i < SCAN_INSNS && left && cs_disasm_iter(cs, &code, &left, &at, insn);
	     i++) {
		const cs_x86 *x = &insn->detail->x86;

		if (insn->id == X86_INS_CALL)
			return insn->bytes[0] == 0xe8 && x->op_count == 1 &&
				       x->operands[0].type == X86_OP_IMM
				   ? (uint64_t)x->operands[0].imm
				   : 0;
		if (insn->id == X86_INS_JMP || insn->id == X86_INS_RET ||
		    insn->id == X86_INS_LJMP || insn->id == X86_INS_RETF)
			return 0;
		if (args_kept && writes_args(cs, insn))
			return 0;
	}
	return 0;
}

static void point(struct tls_point *p, uint64_t addr, uint8_t call, uint8_t how, uint8_t fn)
{
	p->addr = addr;
	p->call = call;
	p->how = how;
	p->fn = fn;
}

static void point_alone(const struct tls_image *img, struct tls_point *p, uint8_t fn, uint8_t call)
{
	uint64_t at = cheap_entry(img, img->fn[fn]);

	point(p, at ? at : img->fn[fn], call, at ? TLS_AT_EMULATED : TLS_AT_ENTRY, fn);
}

int tls_at__plan(const struct tls_image *img, struct tls_point *pts)
{
	static const struct {
		uint8_t fn, ex, call, call_ex, call_any;
	} pairs[] = {
	    {TLS_FN_READ, TLS_FN_READ_EX, CP_TLS_SSL_READ, CP_TLS_SSL_READ_EX, CP_TLS_SSL_READ_ANY},
	    {TLS_FN_WRITE, TLS_FN_WRITE_EX, CP_TLS_SSL_WRITE, CP_TLS_SSL_WRITE_EX,
	     CP_TLS_SSL_WRITE_ANY},
	};
	cs_insn *insn = NULL;
	csh cs = 0;
	int n = 0;

	if (!img->fn[TLS_FN_READ] || !img->fn[TLS_FN_WRITE])
		return -ENOENT;
	/* without the disassembler, no callee is looked for: the entries */
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) == CS_ERR_OK) {
		cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
		insn = cs_malloc(cs);
	}
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		uint64_t f = img->fn[pairs[i].fn], fx = img->fn[pairs[i].ex], at = 0;

		if (insn && !cheap_entry(img, f) && fx) {
			uint64_t t = first_call(cs, insn, img, f, false);

			if (t && t == first_call(cs, insn, img, fx, true))
				at = cheap_entry(img, t);
		}
		if (at) {
			point(&pts[n++], at, pairs[i].call_any, TLS_AT_CALLEE, pairs[i].fn);
			continue;
		}
		point_alone(img, &pts[n++], pairs[i].fn, pairs[i].call);
		if (fx)
			point_alone(img, &pts[n++], pairs[i].ex, pairs[i].call_ex);
	}
	if (img->fn[TLS_FN_HANDSHAKE])
		point_alone(img, &pts[n++], TLS_FN_HANDSHAKE, CP_TLS_SSL_HANDSHAKE);
	if (insn)
		cs_free(insn, 1);
	if (cs)
		cs_close(&cs);
	return n;
}

const char *tls_at__name(const struct tls_point *p)
{
	if (p->how == TLS_AT_CALLEE)
		return p->fn == TLS_FN_READ ? "SSL_read(_ex)" : "SSL_write(_ex)";
	return p->fn < TLS_FN_N ? fn_names[p->fn] : "?";
}


#define PASS_INSNS 8
#define BODY_BYTES (64u << 10)

static bool writes_sp(csh cs, const cs_insn *insn)
{
	cs_regs rd, wr;
	uint8_t nrd = 0, nwr = 0;

	if (cs_regs_access(cs, insn, rd, &nrd, wr, &nwr) != CS_ERR_OK)
		return true; /* not known: as if it did */
	for (int i = 0; i < nwr; i++)
		if (wr[i] == X86_REG_RSP || wr[i] == X86_REG_ESP || wr[i] == X86_REG_SP ||
		    wr[i] == X86_REG_SPL)
			return true;
	return false;
}

static bool is_flow(const cs_insn *insn)
{
	const cs_detail *d = insn->detail;

	for (int i = 0; i < d->groups_count; i++)
		if (d->groups[i] == CS_GRP_JUMP || d->groups[i] == CS_GRP_CALL ||
		    d->groups[i] == CS_GRP_RET || d->groups[i] == CS_GRP_INT ||
		    d->groups[i] == CS_GRP_IRET)
			return true;
	return false;
}

static bool lands_in(csh cs, cs_insn *insn, const struct tls_image *img, uint64_t addr,
		     uint64_t size, uint64_t lo, uint64_t hi)
{
	uint8_t *buf;
	const uint8_t *code;
	size_t left;
	uint64_t at = addr;
	int n;

	if (!size || size > BODY_BYTES || !(buf = malloc(size)))
		return true;
	n = img->read(img->arg, addr, buf, size);
	code = buf;
	left = n > 0 ? (size_t)n : 0;
	if (left != size) {
		free(buf);
		return true;
	}
	while (left) {
		const cs_x86 *x;

		if (!cs_disasm_iter(cs, &code, &left, &at, insn)) {
			free(buf);
			return true;
		}
		x = &insn->detail->x86;
		if (!is_flow(insn) || insn->id == X86_INS_RET || insn->id == X86_INS_RETF)
			continue;
		if (x->op_count == 1 && x->operands[0].type == X86_OP_IMM) {
			uint64_t to = (uint64_t)x->operands[0].imm;

			if (to <= lo || to > hi)
				continue;
		} else if (insn->id == X86_INS_CALL || insn->id == X86_INS_INT3 ||
			   insn->id == X86_INS_SYSCALL) {
			continue; /* elsewhere, and back after itself */
		}
		free(buf);
		return true;
	}
	free(buf);
	return false;
}

uint64_t tls_at__fn_entry(const struct tls_image *img, uint64_t addr, uint64_t size,
			  uint8_t *how)
{
	uint8_t buf[PASS_INSNS * 15], c[8];
	const uint8_t *code = buf;
	uint64_t at = addr, past;
	cs_insn *insn = NULL;
	csh cs = 0;
	size_t left;
	int n;

	*how = TLS_AT_ENTRY;
	past = cheap_entry(img, addr);
	if (past) { /* the entry, or past endbr64: nothing jumps to a push */
		*how = TLS_AT_EMULATED;
		return past - addr;
	}
	n = img->read(img->arg, addr, buf, sizeof(buf));
	left = n > 0 ? (size_t)n : 0;
	if (is_endbr64(buf, left)) {
		code += 4;
		left -= 4;
		at += 4;
	}
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return 0;
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	insn = cs_malloc(cs);
	past = 0;
	for (int i = 0; insn && i < PASS_INSNS && left; i++) {
		size_t k = left < sizeof(c) ? left : sizeof(c);

		memcpy(c, code, k);
		if (tls_at__emulated(c, k)) {
			past = at;
			break;
		}
		/* passed over: straight on, the stack pointer where it was */
		if (!cs_disasm_iter(cs, &code, &left, &at, insn) || is_flow(insn) ||
		    insn->id == X86_INS_SYSCALL || writes_sp(cs, insn))
			break;
	}
	if (past && lands_in(cs, insn, img, addr, size, addr, past))
		past = 0;
	if (insn)
		cs_free(insn, 1);
	cs_close(&cs);
	if (!past)
		return 0;
	*how = TLS_AT_EMULATED;
	return past - addr;
}


struct elf_image {
	int fd;
	Elf *elf;
};

static int64_t file_offset(Elf *elf, uint64_t addr, uint64_t *room)
{
	size_t n;

	if (elf_getphdrnum(elf, &n))
		return -1;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD || addr < ph.p_vaddr ||
		    addr - ph.p_vaddr >= ph.p_filesz)
			continue;
		*room = ph.p_filesz - (addr - ph.p_vaddr);
		return (int64_t)(addr - ph.p_vaddr + ph.p_offset);
	}
	return -1;
}

static int elf_read(void *arg, uint64_t addr, uint8_t *buf, size_t n)
{
	struct elf_image *im = arg;
	uint64_t room = 0;
	int64_t off = file_offset(im->elf, addr, &room);
	ssize_t got;

	if (off < 0)
		return -1;
	if (n > room)
		n = room;
	got = pread(im->fd, buf, n, off);
	return got < 0 ? -1 : (int)got;
}

static int elf_image_open(struct elf_image *im, const char *bin)
{
	im->fd = -1;
	im->elf = NULL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	im->fd = open(bin, O_RDONLY | O_CLOEXEC);
	if (im->fd < 0)
		return -errno;
	im->elf = elf_begin(im->fd, ELF_C_READ_MMAP, NULL);
	return im->elf && elf_kind(im->elf) == ELF_K_ELF ? 0 : -ENOENT;
}

static void elf_image_close(struct elf_image *im)
{
	if (im->elf)
		elf_end(im->elf);
	if (im->fd >= 0)
		close(im->fd);
}

/* The addresses of the functions defined in the symbol table scn. */
static void find_fns(Elf *elf, Elf_Scn *scn, uint64_t *fn)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	GElf_Shdr sh;
	size_t n;

	if (!d || !gelf_getshdr(scn, &sh) || !sh.sh_entsize)
		return;
	n = sh.sh_size / sh.sh_entsize;
	for (size_t i = 0; i < n; i++) {
		const char *name;
		GElf_Sym sym;

		if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
		    sym.st_shndx == SHN_UNDEF || !sym.st_value)
			continue;
		name = elf_strptr(elf, sh.sh_link, sym.st_name);
		if (!name || strncmp(name, "SSL_", 4))
			continue;
		for (int j = 0; j < TLS_FN_N; j++)
			if (!fn[j] && !strcmp(name, fn_names[j]))
				fn[j] = sym.st_value;
	}
}

int tls_at__plan_elf(const char *bin, struct tls_point *pts)
{
	struct elf_image im;
	struct tls_image img = {.read = elf_read, .arg = &im};
	Elf_Scn *scn = NULL;
	int n = elf_image_open(&im, bin);

	if (n)
		goto out;
	while ((scn = elf_nextscn(im.elf, scn))) {
		GElf_Shdr sh;

		if (gelf_getshdr(scn, &sh) &&
		    (sh.sh_type == SHT_DYNSYM || sh.sh_type == SHT_SYMTAB))
			find_fns(im.elf, scn, img.fn);
	}
	n = tls_at__plan(&img, pts);
	for (int i = 0; i < n; i++) {
		uint64_t room;
		int64_t off = file_offset(im.elf, pts[i].addr, &room);

		if (off < 0) {
			n = -ENOENT;
			break;
		}
		pts[i].addr = (uint64_t)off;
	}
out:
	elf_image_close(&im);
	return n;
}

/* The function symbol as libbpf picks it: 1 found, 0 none, -1 ambiguous. */
static int find_fn(Elf *elf, Elf_Scn *scn, const char *symbol, uint64_t *addr, uint64_t *size)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	size_t len = strlen(symbol), n;
	int found = 0, bind = -1;
	GElf_Shdr sh;

	if (!d || !gelf_getshdr(scn, &sh) || !sh.sh_entsize)
		return 0;
	n = sh.sh_size / sh.sh_entsize;
	for (size_t i = 0; i < n; i++) {
		const char *name;
		GElf_Sym sym;
		int b;

		if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
		    sym.st_shndx == SHN_UNDEF || !sym.st_value)
			continue;
		name = elf_strptr(elf, sh.sh_link, sym.st_name);
		if (!name || strncmp(name, symbol, len) || (name[len] && name[len] != '@'))
			continue;
		b = GELF_ST_BIND(sym.st_info);
		if (found && sym.st_value != *addr) {
			if (bind != STB_WEAK && b != STB_WEAK)
				return -1;
			if (b == STB_WEAK)
				continue;
		}
		if (found && sym.st_value == *addr)
			continue;
		*addr = sym.st_value;
		*size = sym.st_size;
		bind = b;
		found = 1;
	}
	return found;
}

int tls_at__fn_entry_elf(const char *bin, const char *symbol, uint64_t *skip, uint8_t *how)
{
	struct elf_image im;
	struct tls_image img = {.read = elf_read, .arg = &im};
	uint64_t addr = 0, size = 0;
	Elf_Scn *scn = NULL;
	int found = 0, err;

	*skip = 0;
	*how = TLS_AT_ENTRY;
	err = elf_image_open(&im, bin);
	if (err)
		goto out;
	/* the dynamic symbols first, then the full table, as libbpf looks */
	for (int pass = 0; pass < 2 && !found; pass++) {
		scn = NULL;
		while (!found && (scn = elf_nextscn(im.elf, scn))) {
			GElf_Shdr sh;

			if (gelf_getshdr(scn, &sh) &&
			    sh.sh_type == (pass ? SHT_SYMTAB : SHT_DYNSYM))
				found = find_fn(im.elf, scn, symbol, &addr, &size);
		}
	}
	if (found <= 0)
		err = -ENOENT;
	else
		*skip = tls_at__fn_entry(&img, addr, size, how);
out:
	elf_image_close(&im);
	return err;
}
