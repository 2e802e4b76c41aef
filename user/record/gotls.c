// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* Go's crypto/tls in an executable: offsets of Read, Write and the
 * handshakes, and of Read's RETs or its one memmove call (a uretprobe would
 * crash Go). go1.18+, x86-64. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <capstone/capstone.h>

#include "record_int.h"
#include "record_tls_at.h"

#define GO_READ "crypto/tls.(*Conn).Read"
#define GO_WRITE "crypto/tls.(*Conn).Write"
#define GO_SERVER_HS "crypto/tls.(*Conn).serverHandshake"
#define GO_CLIENT_HS "crypto/tls.(*Conn).clientHandshake"
#define GO_FN_MAX (1 << 20) /* a function's size past which the symbol is not believed */

struct go_sym {
	uint64_t addr, size, off; /* virtual address, size, file offset */
	bool found;
};

#define GO_MEMMOVE "runtime.memmove"

enum { GO_SYM_READ, GO_SYM_WRITE, GO_SYM_SERVER_HS, GO_SYM_CLIENT_HS, GO_SYM_MEMMOVE, GO_NSYMS };
static const char *const go_names[GO_NSYMS] = {GO_READ, GO_WRITE, GO_SERVER_HS, GO_CLIENT_HS,
					       GO_MEMMOVE};

static int buildinfo_version(const uint8_t *d, size_t n, char *out, size_t nout)
{
	static const char magic[] = "\xff Go buildinf:";
	uint64_t len = 0;
	size_t i = 32;

	if (n < 33 || memcmp(d, magic, 14))
		return -EINVAL;
	if (!(d[15] & 2))
		return -ENOTSUP;
	for (int shift = 0; i < n && shift < 64; shift += 7) {
		len |= (uint64_t)(d[i] & 0x7f) << shift;
		if (!(d[i++] & 0x80))
			break;
	}
	if (!len || len > n - i || len >= nout)
		return -EINVAL;
	memcpy(out, d + i, len);
	out[len] = 0;
	return 0;
}

/* "go1.N..." at or after go1.18. */
static bool version_new_enough(const char *v)
{
	int major = 0, minor = 0;

	if (sscanf(v, "go%d.%d", &major, &minor) != 2)
		return false;
	return major > 1 || (major == 1 && minor >= 18);
}

static int find_rets(int fd, const struct go_sym *s, uint64_t memmove, struct go_tls_fns *f,
		     const char **why)
{
	int ncopies = 0;
	const uint8_t *code;
	uint64_t addr;
	size_t left;
	uint8_t *buf;
	cs_insn *insn;
	csh cs;
	int err = 0;

	if (!s->size || s->size > GO_FN_MAX) {
		*why = "crypto/tls.(*Conn).Read has no size in the symbol table";
		return -ENOTSUP;
	}
	buf = malloc(s->size);
	if (!buf)
		return -ENOMEM;
	if (pread(fd, buf, s->size, (off_t)s->off) != (ssize_t)s->size) {
		free(buf);
		*why = "crypto/tls.(*Conn).Read's code could not be read";
		return -EIO;
	}
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK) {
		free(buf);
		*why = "the x86-64 disassembler did not open";
		return -ENOTSUP;
	}
	insn = cs_malloc(cs);
	if (!insn) {
		cs_close(&cs);
		free(buf);
		return -ENOMEM;
	}
	code = buf;
	left = s->size;
	addr = s->addr;
	f->nrets = 0;
	while (left && cs_disasm_iter(cs, &code, &left, &addr, insn)) {
		int32_t rel;

		memcpy(&rel, &insn->bytes[1], sizeof(rel));
		if (insn->id == X86_INS_CALL && insn->size == 5 && insn->bytes[0] == 0xe8 &&
		    memmove && insn->address + 5 + (uint64_t)(int64_t)rel == memmove) {
			f->copy = s->off + (insn->address - s->addr);
			ncopies++;
			continue;
		}
		if (insn->id != X86_INS_RET)
			continue;
		if (f->nrets == GO_TLS_MAX_RETS) {
			*why = "crypto/tls.(*Conn).Read has too many returns";
			err = -ENOTSUP;
			break;
		}
		f->rets[f->nrets++] = s->off + (insn->address - s->addr);
	}
	while (!err && left && *code == 0xcc) {
		code++;
		left--;
	}
	if (!err && left) {
		*why = "crypto/tls.(*Conn).Read's code did not decode into whole instructions";
		err = -ENOTSUP;
	} else if (!err && !f->nrets) {
		*why = "crypto/tls.(*Conn).Read has no RET instruction";
		err = -ENOTSUP;
	}
	if (ncopies != 1) /* which one b's plaintext takes is not known */
		f->copy = 0;
	cs_free(insn, 1);
	cs_close(&cs);
	free(buf);
	return err;
}

/* Where an entry probe of s is emulated: the branch of Go's stack-guard
 * prologue. */
static uint64_t entry_point(int fd, const struct go_sym *s)
{
	uint8_t buf[32];
	const uint8_t *code = buf;
	size_t left;
	uint64_t addr = s->addr, at = s->off;
	cs_insn *insn;
	csh cs;

	if (pread(fd, buf, sizeof(buf), (off_t)s->off) != (ssize_t)sizeof(buf) ||
	    cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return s->off;
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	insn = cs_malloc(cs);
	left = sizeof(buf);
	for (int i = 0; insn && i < 3 && cs_disasm_iter(cs, &code, &left, &addr, insn); i++) {
		const cs_x86 *x = &insn->detail->x86;
		uint64_t off = s->off + (insn->address - s->addr);

		if (tls_at__emulated(insn->bytes, insn->size)) {
			at = off;
			break;
		}
		if (insn->id == X86_INS_CMP)
			continue;
		if (insn->id == X86_INS_LEA && x->op_count == 2 &&
		    x->operands[0].type == X86_OP_REG &&
		    (x->operands[0].reg == X86_REG_R12 || x->operands[0].reg == X86_REG_R13))
			continue;
		break;
	}
	if (insn)
		cs_free(insn, 1);
	cs_close(&cs);
	return at;
}

static int find_syms(Elf *elf, Elf_Scn *symtab, struct go_sym *syms)
{
	Elf_Data *d = elf_getdata(symtab, NULL);
	GElf_Shdr ssh, sh;
	size_t n;

	if (!d || !gelf_getshdr(symtab, &ssh) || !ssh.sh_entsize)
		return -EINVAL;
	n = ssh.sh_size / ssh.sh_entsize;
	for (size_t i = 0; i < n; i++) {
		struct go_sym *s = NULL;
		GElf_Sym sym;
		const char *name;
		Elf_Scn *in;

		if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC)
			continue;
		name = elf_strptr(elf, ssh.sh_link, sym.st_name);
		if (!name || (strncmp(name, "crypto/tls.(*Conn).", 19) && strcmp(name, GO_MEMMOVE)))
			continue;
		for (int j = 0; j < GO_NSYMS; j++)
			if (!strcmp(name, go_names[j]))
				s = &syms[j];
		if (!s)
			continue;
		in = elf_getscn(elf, sym.st_shndx);
		if (!in || !gelf_getshdr(in, &sh) || sym.st_value < sh.sh_addr ||
		    sym.st_value - sh.sh_addr >= sh.sh_size)
			continue;
		s->addr = sym.st_value;
		s->size = sym.st_size;
		s->off = sym.st_value - sh.sh_addr + sh.sh_offset;
		s->found = true;
	}
	return syms[GO_SYM_READ].found && syms[GO_SYM_WRITE].found ? 0 : -ENOENT;
}

static int scan_elf(Elf *elf, struct go_sym *syms, char *version, size_t nv, bool *go)
{
	Elf_Scn *scn = NULL, *symtab = NULL;
	size_t shstrndx;
	GElf_Shdr sh;
	int verr = -ENOENT;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return -EINVAL;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			return -EINVAL;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (sh.sh_type == SHT_SYMTAB)
			symtab = scn;
		if (name && !strcmp(name, ".go.buildinfo") && sh.sh_type == SHT_PROGBITS) {
			Elf_Data *d = elf_getdata(scn, NULL);

			*go = true;
			verr = d && d->d_buf ? buildinfo_version(d->d_buf, d->d_size, version, nv)
					     : -EINVAL;
		}
	}
	if (!*go || verr)
		return verr;
	return symtab ? find_syms(elf, symtab, syms) : -ENODATA;
}

int rec_gotls__find(const char *bin, struct go_tls_fns *f, const char **why)
{
	struct go_sym syms[GO_NSYMS] = {};
	bool go = false;
	Elf *elf;
	int fd, err;

	memset(f, 0, sizeof(*f));
	*why = NULL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	fd = open(bin, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		if (elf)
			elf_end(elf);
		close(fd);
		return -ENOENT;
	}
	err = scan_elf(elf, syms, f->version, sizeof(f->version), &go);
	if (!go || err == -ENOENT) {
		/* not Go, or Go without crypto/tls (or stripped of symbols) */
		err = -ENOENT;
	} else if (err == -ENOTSUP) {
		*why = "Go older than go1.18 (its build info is not inline)";
	} else if (err == -ENODATA) {
		*why = "a Go executable without its symbol table (built with -ldflags=-s)";
		err = -ENOTSUP;
	} else if (!err && !version_new_enough(f->version)) {
		*why = "Go older than go1.18";
		err = -ENOTSUP;
	} else if (err) {
		*why = "its Go build info did not parse";
	}
#if !defined(__x86_64__)
	if (!err) {
		*why = "Go's crypto/tls is probed on x86-64 only";
		err = -ENOTSUP;
	}
#endif
	if (!err) {
		f->read = entry_point(fd, &syms[GO_SYM_READ]);
		f->write = entry_point(fd, &syms[GO_SYM_WRITE]);
		f->server_hs =
		    syms[GO_SYM_SERVER_HS].found ? entry_point(fd, &syms[GO_SYM_SERVER_HS]) : 0;
		f->client_hs =
		    syms[GO_SYM_CLIENT_HS].found ? entry_point(fd, &syms[GO_SYM_CLIENT_HS]) : 0;
		err = find_rets(fd, &syms[GO_SYM_READ],
				syms[GO_SYM_MEMMOVE].found ? syms[GO_SYM_MEMMOVE].addr : 0, f, why);
	}
	elf_end(elf);
	close(fd);
	return err;
}

bool rec_gotls__is_go(const char *bin)
{
	Elf_Scn *scn = NULL;
	bool go = false;
	size_t shstrndx;
	Elf *elf;
	int fd;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return false;
	fd = open(bin, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (elf && elf_kind(elf) == ELF_K_ELF && !elf_getshdrstrndx(elf, &shstrndx)) {
		while (!go && (scn = elf_nextscn(elf, scn))) {
			GElf_Shdr sh;
			const char *name;

			if (!gelf_getshdr(scn, &sh))
				break;
			name = elf_strptr(elf, shstrndx, sh.sh_name);
			go = name && (!strcmp(name, ".go.buildinfo") || !strcmp(name, ".gopclntab"));
		}
	}
	if (elf)
		elf_end(elf);
	close(fd);
	return go;
}
