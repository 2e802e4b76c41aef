// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * Where record places OpenSSL's uprobes (user/record/tls_at.c), on machine
 * code laid out as the OpenSSL builds it meets are: Debian 12's libssl.so.3
 * (SSL_read and SSL_read_ex both calling ssl_read_internal, whose entry is
 * a push), OpenSSL 3.2's SSL_write_ex going through SSL_write_ex2, builds
 * with endbr64, and Node's (frame pointers: a push first). And on the real
 * libssl.so.3 when the machine has it.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "critpath_abi.h"
#include "record_tls_at.h"

#define BASE 0x1000u
#define SIZE 0x1000u

struct code {
	uint8_t b[SIZE];
	uint32_t at; /* the next byte's address */
};

static int code_read(void *arg, uint64_t addr, uint8_t *buf, size_t n)
{
	struct code *c = arg;

	if (addr < BASE || addr >= BASE + SIZE)
		return -1;
	if (n > BASE + SIZE - addr)
		n = BASE + SIZE - addr;
	memcpy(buf, c->b + (addr - BASE), n);
	return (int)n;
}

static void org(struct code *c, uint32_t addr)
{
	c->at = addr;
}

static void emit(struct code *c, size_t n, ...)
{
	va_list ap;

	va_start(ap, n);
	for (size_t i = 0; i < n; i++)
		c->b[c->at++ - BASE] = (uint8_t)va_arg(ap, int);
	va_end(ap);
}

static void call(struct code *c, uint32_t target)
{
	int32_t rel = (int32_t)(target - (c->at + 5));

	emit(c, 5, 0xe8, rel & 0xff, (rel >> 8) & 0xff, (rel >> 16) & 0xff, (rel >> 24) & 0xff);
}

#define SUB_RSP(c, n) emit(c, 4, 0x48, 0x83, 0xec, n)
#define RET(c) emit(c, 1, 0xc3)
#define ENDBR64(c) emit(c, 4, 0xf3, 0x0f, 0x1e, 0xfa)

enum {
	F_READ = 0x1000,
	F_READ_EX = 0x1100,
	T_READ = 0x1200,
	F_WRITE = 0x1300,
	F_WRITE_EX = 0x1400,
	T_WRITE = 0x1500,
	F_HS = 0x1600,
	F_WRITE_EX2 = 0x1700,
};

/* SSL_read's shape in Debian's libssl.so.3: sub, a check of num (a jump
 * past the call when negative), &readbytes into rcx, the call. */
static void plain_fn(struct code *c, uint32_t at, uint32_t callee)
{
	org(c, at);
	SUB_RSP(c, 0x18);
	emit(c, 2, 0x85, 0xd2);	      /* test %edx,%edx */
	emit(c, 2, 0x78, 0x0e);	      /* js (the error path) */
	emit(c, 3, 0x48, 0x89, 0xe1); /* mov %rsp,%rcx */
	emit(c, 3, 0x48, 0x63, 0xd2); /* movslq %edx,%rdx */
	call(c, callee);
	RET(c);
}

/* SSL_read_ex's: sub, the call with its arguments as they came */
static void ex_fn(struct code *c, uint32_t at, uint32_t callee)
{
	org(c, at);
	SUB_RSP(c, 0x08);
	call(c, callee);
	RET(c);
}

/* an internal function: push %r13 (41 55) first */
static void callee_fn(struct code *c, uint32_t at)
{
	org(c, at);
	emit(c, 2, 0x41, 0x55);
	SUB_RSP(c, 0x38);
	RET(c);
}

static struct tls_image debian_like(struct code *c)
{
	struct tls_image img = {.read = code_read, .arg = c};

	memset(c->b, 0xcc, sizeof(c->b));
	plain_fn(c, F_READ, T_READ);
	ex_fn(c, F_READ_EX, T_READ);
	callee_fn(c, T_READ);
	plain_fn(c, F_WRITE, T_WRITE);
	ex_fn(c, F_WRITE_EX, T_WRITE);
	callee_fn(c, T_WRITE);
	org(c, F_HS);
	emit(c, 1, 0x53); /* push %rbx */
	RET(c);
	img.fn[TLS_FN_READ] = F_READ;
	img.fn[TLS_FN_READ_EX] = F_READ_EX;
	img.fn[TLS_FN_WRITE] = F_WRITE;
	img.fn[TLS_FN_WRITE_EX] = F_WRITE_EX;
	img.fn[TLS_FN_HANDSHAKE] = F_HS;
	return img;
}

static void expect_point(const struct tls_point *p, uint64_t addr, uint8_t call, uint8_t how,
			 const char *name)
{
	assert_int_equal(p->addr, addr);
	assert_int_equal(p->call, call);
	assert_int_equal(p->how, how);
	assert_string_equal(tls_at__name(p), name);
}

static void test_emulated(void **state)
{
	static const uint8_t push_rbx[] = {0x53}, push_r13[] = {0x41, 0x55},
			     call_rel[] = {0xe8, 0, 0, 0, 0}, nop[] = {0x90},
			     sub_rsp[] = {0x48, 0x83, 0xec, 0x18},
			     endbr[] = {0xf3, 0x0f, 0x1e, 0xfa}, ret[] = {0xc3},
			     mov_rsp[] = {0x48, 0x89, 0xe5}, jbe32[] = {0x0f, 0x86, 0, 0, 0, 0},
			     jbe8[] = {0x76, 0}, nopl5[] = {0x0f, 0x1f, 0x44, 0, 0},
			     nopl8[] = {0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0},
			     hint_nop[] = {0x0f, 0x1f, 0x4c, 0, 0}; /* modrm reg 1: not a nopl */

	(void)state;
	assert_true(tls_at__emulated(push_rbx, sizeof(push_rbx)));
	assert_true(tls_at__emulated(push_r13, sizeof(push_r13)));
	assert_true(tls_at__emulated(call_rel, sizeof(call_rel)));
	assert_true(tls_at__emulated(nop, sizeof(nop)));
	assert_true(tls_at__emulated(jbe32, sizeof(jbe32)));
	assert_true(tls_at__emulated(jbe8, sizeof(jbe8)));
	assert_true(tls_at__emulated(nopl5, sizeof(nopl5)));
	assert_true(tls_at__emulated(nopl8, sizeof(nopl8)));
	assert_false(tls_at__emulated(hint_nop, sizeof(hint_nop)));
	assert_false(tls_at__emulated(nopl5, 2));
	assert_false(tls_at__emulated(sub_rsp, sizeof(sub_rsp)));
	assert_false(tls_at__emulated(endbr, sizeof(endbr)));
	assert_false(tls_at__emulated(ret, sizeof(ret)));
	assert_false(tls_at__emulated(mov_rsp, sizeof(mov_rsp)));
	assert_false(tls_at__emulated(push_r13, 1)); /* a REX prefix alone */
	assert_false(tls_at__emulated(push_rbx, 0));
}

/* Debian 12: SSL_read and SSL_write begin with sub; each pair is probed once,
 * at its callee (push first), with the _ex convention; the handshake at its
 * entry (push first). */
static void test_debian_callees(void **state)
{
	struct code c;
	struct tls_image img = debian_like(&c);
	struct tls_point p[TLS_AT_MAX];

	(void)state;
	assert_int_equal(tls_at__plan(&img, p), 3);
	expect_point(&p[0], T_READ, CP_TLS_SSL_READ_ANY, TLS_AT_CALLEE, "SSL_read(_ex)");
	expect_point(&p[1], T_WRITE, CP_TLS_SSL_WRITE_ANY, TLS_AT_CALLEE, "SSL_write(_ex)");
	expect_point(&p[2], F_HS, CP_TLS_SSL_HANDSHAKE, TLS_AT_EMULATED, "SSL_do_handshake");
}

/* OpenSSL 3.2: SSL_write_ex calls SSL_write_ex2, not the callee SSL_write
 * calls (which takes flags before the count's pointer): the writes stay
 * at their entries, single-stepped; the reads still go to their callee. */
static void test_write_ex2(void **state)
{
	struct code c;
	struct tls_image img = debian_like(&c);
	struct tls_point p[TLS_AT_MAX];

	(void)state;
	ex_fn(&c, F_WRITE_EX, F_WRITE_EX2);
	ex_fn(&c, F_WRITE_EX2, T_WRITE);
	assert_int_equal(tls_at__plan(&img, p), 4);
	expect_point(&p[0], T_READ, CP_TLS_SSL_READ_ANY, TLS_AT_CALLEE, "SSL_read(_ex)");
	expect_point(&p[1], F_WRITE, CP_TLS_SSL_WRITE, TLS_AT_ENTRY, "SSL_write");
	expect_point(&p[2], F_WRITE_EX, CP_TLS_SSL_WRITE_EX, TLS_AT_ENTRY, "SSL_write_ex");
	expect_point(&p[3], F_HS, CP_TLS_SSL_HANDSHAKE, TLS_AT_EMULATED, "SSL_do_handshake");
}

/* The callee is not believed to take SSL_read_ex's arguments when
 * SSL_read_ex changes one before the call, nor used when its own entry is
 * not emulated, nor known without SSL_read_ex. */
static void test_callee_refused(void **state)
{
	struct code c;
	struct tls_image img = debian_like(&c);
	struct tls_point p[TLS_AT_MAX];

	(void)state;
	org(&c, F_READ_EX);
	SUB_RSP(&c, 0x08);
	emit(&c, 3, 0x48, 0x31, 0xc9); /* xor %rcx,%rcx */
	call(&c, T_READ);
	RET(&c);
	org(&c, T_WRITE);
	SUB_RSP(&c, 0x38);
	assert_int_equal(tls_at__plan(&img, p), 5);
	expect_point(&p[0], F_READ, CP_TLS_SSL_READ, TLS_AT_ENTRY, "SSL_read");
	expect_point(&p[1], F_READ_EX, CP_TLS_SSL_READ_EX, TLS_AT_ENTRY, "SSL_read_ex");
	expect_point(&p[2], F_WRITE, CP_TLS_SSL_WRITE, TLS_AT_ENTRY, "SSL_write");
	expect_point(&p[3], F_WRITE_EX, CP_TLS_SSL_WRITE_EX, TLS_AT_ENTRY, "SSL_write_ex");

	img = debian_like(&c);
	img.fn[TLS_FN_READ_EX] = 0; /* OpenSSL 1.1.0: no _ex forms */
	img.fn[TLS_FN_WRITE_EX] = 0;
	img.fn[TLS_FN_HANDSHAKE] = 0;
	assert_int_equal(tls_at__plan(&img, p), 2);
	expect_point(&p[0], F_READ, CP_TLS_SSL_READ, TLS_AT_ENTRY, "SSL_read");
	expect_point(&p[1], F_WRITE, CP_TLS_SSL_WRITE, TLS_AT_ENTRY, "SSL_write");
}

/* Node's OpenSSL (frame pointers): push first, each function at its own
 * entry; with endbr64 first, just past it; endbr64 before a sub gains
 * nothing and stays at the entry. */
static void test_entries(void **state)
{
	struct code c;
	struct tls_image img = debian_like(&c);
	struct tls_point p[TLS_AT_MAX];

	(void)state;
	org(&c, F_READ);
	emit(&c, 1, 0x55); /* push %rbp */
	org(&c, F_READ_EX);
	ENDBR64(&c);
	emit(&c, 1, 0x55);
	org(&c, F_WRITE);
	ENDBR64(&c);
	emit(&c, 1, 0x55);
	org(&c, F_WRITE_EX);
	ENDBR64(&c);
	SUB_RSP(&c, 0x08);
	assert_int_equal(tls_at__plan(&img, p), 5);
	expect_point(&p[0], F_READ, CP_TLS_SSL_READ, TLS_AT_EMULATED, "SSL_read");
	expect_point(&p[1], F_READ_EX + 4, CP_TLS_SSL_READ_EX, TLS_AT_EMULATED, "SSL_read_ex");
	expect_point(&p[2], F_WRITE + 4, CP_TLS_SSL_WRITE, TLS_AT_EMULATED, "SSL_write");
	expect_point(&p[3], F_WRITE_EX, CP_TLS_SSL_WRITE_EX, TLS_AT_ENTRY, "SSL_write_ex");
	expect_point(&p[4], F_HS, CP_TLS_SSL_HANDSHAKE, TLS_AT_EMULATED, "SSL_do_handshake");
}

/* A callee behind endbr64 is probed past it. */
static void test_callee_endbr(void **state)
{
	struct code c;
	struct tls_image img = debian_like(&c);
	struct tls_point p[TLS_AT_MAX];

	(void)state;
	org(&c, T_READ);
	ENDBR64(&c);
	emit(&c, 2, 0x41, 0x55);
	assert_int_equal(tls_at__plan(&img, p), 3);
	expect_point(&p[0], T_READ + 4, CP_TLS_SSL_READ_ANY, TLS_AT_CALLEE, "SSL_read(_ex)");
}

static void test_not_openssl(void **state)
{
	struct code c;
	struct tls_image img = debian_like(&c);
	struct tls_point p[TLS_AT_MAX];

	(void)state;
	img.fn[TLS_FN_WRITE] = 0;
	assert_int_equal(tls_at__plan(&img, p), -ENOENT);
	assert_int_equal(tls_at__plan_elf("/proc/self/status", p), -ENOENT);
	assert_int_equal(tls_at__plan_elf("/nonexistent/libssl.so.3", p), -ENOENT);
}

/* The machine's own libssl, when it has Debian 12's: SSL_read and
 * SSL_write at their callees (file offsets inside the library). */
static void test_real_libssl(void **state)
{
	static const char *const paths[] = {"/usr/lib/x86_64-linux-gnu/libssl.so.3",
					    "/lib/x86_64-linux-gnu/libssl.so.3"};
	struct tls_point p[TLS_AT_MAX];
	const char *lib = NULL;
	int n;

	(void)state;
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]) && !lib; i++)
		if (!access(paths[i], R_OK))
			lib = paths[i];
	if (!lib)
		skip();
	n = tls_at__plan_elf(lib, p);
	assert_true(n >= 2);
	for (int i = 0; i < n; i++)
		assert_true(p[i].addr > 0);
	print_message("%s: %d points, first %s (how %d) at 0x%llx\n", lib, n, tls_at__name(&p[0]),
		      p[0].how, (unsigned long long)p[0].addr);
}

/* --- record --probe: any function ---------------------------------------- */

#define FN 0x1800u
#define FN_SIZE(c) ((c)->at - FN)

static uint64_t fn_entry(struct code *c, uint64_t size, uint8_t *how)
{
	struct tls_image img = {.read = code_read, .arg = c};

	return tls_at__fn_entry(&img, FN, size, how);
}

static struct code *fn_code(struct code *c)
{
	memset(c->b, 0xcc, sizeof(c->b));
	org(c, FN);
	return c;
}

/* kp_server's probe_parse at -O2: a constant into xmm0, a tail call. The
 * jmp is emulated and the return address still on top of the stack. */
static void test_fn_tail_call(void **state)
{
	struct code c;
	uint8_t how;

	(void)state;
	fn_code(&c);
	emit(&c, 8, 0xf2, 0x0f, 0x10, 0x05, 0x60, 0x09, 0x00, 0x00); /* movsd 0x960(%rip),%xmm0 */
	emit(&c, 5, 0xe9, 0x00, 0x01, 0x00, 0x00);		      /* jmp (elsewhere) */
	assert_int_equal(fn_entry(&c, FN_SIZE(&c), &how), 8);
	assert_int_equal(how, TLS_AT_EMULATED);
	/* without the function's size, no jump back can be ruled out */
	assert_int_equal(fn_entry(&c, 0, &how), 0);
	assert_int_equal(how, TLS_AT_ENTRY);
}

/* A leaf: loads and a test before its first branch, probed at the branch;
 * not when a loop of the function jumps back to it. */
static void test_fn_leaf_and_loop(void **state)
{
	struct code c;
	uint8_t how;
	uint32_t je;

	(void)state;
	fn_code(&c);
	ENDBR64(&c);
	emit(&c, 2, 0x8b, 0x07); /* mov (%rdi),%eax */
	emit(&c, 2, 0x85, 0xc0); /* test %eax,%eax */
	je = c.at;
	emit(&c, 2, 0x74, 0x03);       /* je +3 */
	emit(&c, 3, 0x48, 0x01, 0xc7); /* add %rax,%rdi */
	RET(&c);
	assert_int_equal(fn_entry(&c, FN_SIZE(&c), &how), je - FN);
	assert_int_equal(how, TLS_AT_EMULATED);

	org(&c, je + 5);
	emit(&c, 2, 0xeb, (uint8_t)(je - (c.at + 2))); /* jmp back to the je */
	RET(&c);
	assert_int_equal(fn_entry(&c, FN_SIZE(&c), &how), 0);
	assert_int_equal(how, TLS_AT_ENTRY);
	/* nor to an instruction passed over */
	org(&c, je + 5);
	emit(&c, 2, 0xeb, (uint8_t)(FN + 6 - (c.at + 2))); /* jmp to the test */
	RET(&c);
	assert_int_equal(fn_entry(&c, FN_SIZE(&c), &how), 0);
	/* a jump table could land anywhere */
	org(&c, je + 5);
	emit(&c, 2, 0xff, 0xe0); /* jmp *%rax */
	assert_int_equal(fn_entry(&c, FN_SIZE(&c), &how), 0);
}

/* The demo's price_cart at -O2: constants into registers, then the nopl
 * that aligns its loop's head; probed at the nopl, which the loop's jump
 * back does not reach. */
static void test_fn_loop_padding(void **state)
{
	struct code c;
	uint8_t how;
	uint32_t nopl, head;

	(void)state;
	fn_code(&c);
	emit(&c, 10, 0x48, 0xbe, 1, 2, 3, 4, 5, 6, 7, 8); /* movabs $..,%rsi */
	emit(&c, 2, 0x89, 0xf9);			  /* mov %edi,%ecx */
	emit(&c, 2, 0x31, 0xd2);			  /* xor %edx,%edx */
	nopl = c.at;
	emit(&c, 8, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0); /* nopl 0x0(%rax,%rax,1) */
	head = c.at;
	emit(&c, 3, 0x48, 0x01, 0xd1);		       /* add %rdx,%rcx */
	emit(&c, 4, 0x48, 0x83, 0xc2, 0x01);	       /* add $1,%rdx */
	emit(&c, 2, 0x75, (uint8_t)(head - (c.at + 2))); /* jne head */
	RET(&c);
	assert_int_equal(fn_entry(&c, FN_SIZE(&c), &how), nopl - FN);
	assert_int_equal(how, TLS_AT_EMULATED);
}

/* What moves the stack pointer, makes a system call or branches is not
 * passed over: the entry stays, single-stepped. */
static void test_fn_not_passed(void **state)
{
	struct code c;
	uint8_t how;

	(void)state;
	fn_code(&c);
	SUB_RSP(&c, 0x08); /* probe_render's */
	call(&c, 0x1f00);
	assert_int_equal(fn_entry(&c, FN_SIZE(&c), &how), 0);
	assert_int_equal(how, TLS_AT_ENTRY);

	fn_code(&c);
	emit(&c, 5, 0xb8, 0x01, 0x00, 0x00, 0x00); /* mov $1,%eax */
	emit(&c, 2, 0x0f, 0x05);		   /* syscall */
	emit(&c, 2, 0x74, 0x00);		   /* je */
	RET(&c);
	assert_int_equal(fn_entry(&c, FN_SIZE(&c), &how), 0);

	fn_code(&c);
	emit(&c, 3, 0x48, 0x89, 0xf8); /* mov %rdi,%rax */
	emit(&c, 1, 0x5b);	       /* pop %rbx */
	emit(&c, 1, 0x53);	       /* push %rbx */
	RET(&c);
	assert_int_equal(fn_entry(&c, FN_SIZE(&c), &how), 0);

	fn_code(&c);
	emit(&c, 3, 0x48, 0x89, 0xf8); /* mov %rdi,%rax */
	RET(&c);		       /* a ret is not emulated */
	assert_int_equal(fn_entry(&c, FN_SIZE(&c), &how), 0);
	assert_int_equal(how, TLS_AT_ENTRY);
}

/* A push first, or endbr64 and a push: there, whatever follows. */
static void test_fn_push(void **state)
{
	struct code c;
	uint8_t how;

	(void)state;
	fn_code(&c);
	emit(&c, 1, 0x55); /* push %rbp */
	emit(&c, 2, 0xff, 0xe0);
	assert_int_equal(fn_entry(&c, 0, &how), 0);
	assert_int_equal(how, TLS_AT_EMULATED);
	fn_code(&c);
	ENDBR64(&c);
	emit(&c, 2, 0x41, 0x54); /* push %r12 */
	assert_int_equal(fn_entry(&c, 0, &how), 4);
	assert_int_equal(how, TLS_AT_EMULATED);
}

/* The machine's libc: a function planned past its entry is planned at an
 * emulated instruction, and one that is not there is at 0 (libbpf adds
 * the offset to the function's). */
static void test_real_libc(void **state)
{
	static const char *const paths[] = {"/lib/x86_64-linux-gnu/libc.so.6",
					    "/usr/lib/x86_64-linux-gnu/libc.so.6"};
	static const char *const fns[] = {"write", "read", "free", "malloc", "epoll_wait",
					  "pthread_mutex_lock", "nanosleep"};
	const char *lib = NULL;

	(void)state;
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]) && !lib; i++)
		if (!access(paths[i], R_OK))
			lib = paths[i];
	if (!lib)
		skip();
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		uint64_t off;
		uint8_t how;

		assert_int_equal(tls_at__fn_entry_elf(lib, fns[i], &off, &how), 0);
		assert_true(how == TLS_AT_EMULATED || off == 0);
		print_message("%s: %s at +%llu (%s)\n", lib, fns[i], (unsigned long long)off,
			      how == TLS_AT_EMULATED ? "emulated" : "stepped");
	}
	{
		uint64_t off;
		uint8_t how;

		assert_int_equal(tls_at__fn_entry_elf(lib, "no_such_function_here", &off, &how),
				 -ENOENT);
		assert_int_equal(how, TLS_AT_ENTRY);
		assert_int_equal(tls_at__fn_entry_elf("/nonexistent", "write", &off, &how),
				 -ENOENT);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_emulated),	cmocka_unit_test(test_debian_callees),
	    cmocka_unit_test(test_write_ex2),	cmocka_unit_test(test_callee_refused),
	    cmocka_unit_test(test_entries),	cmocka_unit_test(test_callee_endbr),
	    cmocka_unit_test(test_not_openssl), cmocka_unit_test(test_real_libssl),
	    cmocka_unit_test(test_fn_tail_call), cmocka_unit_test(test_fn_leaf_and_loop),
	    cmocka_unit_test(test_fn_loop_padding), cmocka_unit_test(test_fn_not_passed),
	    cmocka_unit_test(test_fn_push),
	    cmocka_unit_test(test_real_libc),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
