/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * Where OpenSSL's functions are probed, and those of record --probe
 * (record/tls_at.c says why it matters): a plan made from a library's
 * code, without libbpf, so the unit tests can run it on machine code of
 * their own (tests/unit/test_rec_tls_at.c).
 */
#ifndef CRITPATH_RECORD_TLS_AT_H
#define CRITPATH_RECORD_TLS_AT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum tls_fn {
	TLS_FN_READ, /* SSL_read */
	TLS_FN_READ_EX,
	TLS_FN_WRITE,
	TLS_FN_WRITE_EX,
	/* SSL_do_handshake: the connection a read-ahead handshake took a
	 * request in from, and where an SSL * begins a connection
	 * (bpf/tls.bpf.c's tls_hs) */
	TLS_FN_HANDSHAKE,
	TLS_FN_N,
};

/* A library's code by virtual address, and its functions' addresses (0:
 * absent). read copies up to n bytes at addr into buf and returns how many
 * (fewer past the end of the code, 0 or less outside it). */
struct tls_image {
	int (*read)(void *arg, uint64_t addr, uint8_t *buf, size_t n);
	void *arg;
	uint64_t fn[TLS_FN_N];
};

enum tls_at_how {
	TLS_AT_ENTRY,	 /* the function's first instruction, single-stepped */
	TLS_AT_EMULATED, /* its first instruction, or the one after endbr64: emulated */
	TLS_AT_CALLEE,	 /* the function it and its _ex form both begin by calling */
};

/* Where one uprobe and one uretprobe go: addr, with call (enum
 * cp_tls_call) as their BPF cookie; fn: the function it stands for (with
 * its _ex form, TLS_AT_CALLEE). */
struct tls_point {
	uint64_t addr;
	uint8_t call;
	uint8_t how; /* enum tls_at_how */
	uint8_t fn;  /* enum tls_fn */
};

#define TLS_AT_MAX TLS_FN_N

/* The kernel's uprobes step over this instruction by emulating it (a push
 * of a register, a relative call or jump, a conditional jump, a nop or
 * nopl), not by a single step out of line. */
bool tls_at__emulated(const uint8_t *code, size_t n);

/* The points for img's functions into pts (TLS_AT_MAX at most); their
 * number, or -ENOENT when SSL_read or SSL_write is absent. */
int tls_at__plan(const struct tls_image *img, struct tls_point *pts);

/* The same for the ELF file bin, with file offsets (what a uprobe is
 * attached at) in pts[].addr; -ENOENT also when bin is no ELF file. */
int tls_at__plan_elf(const char *bin, struct tls_point *pts);

/* Where a uprobe and a uretprobe that read no register (record --probe:
 * enter and exit only) see each call of the function at addr, size bytes
 * long, for less: the offset from addr of an instruction the kernel
 * emulates, reached from the entry along straight code that leaves the
 * stack pointer alone (the return address on top, as a uretprobe needs),
 * past a leading endbr64, and into which no code of the function jumps
 * back; then *how is TLS_AT_EMULATED. 0 and TLS_AT_ENTRY: at the entry,
 * single-stepped. (size 0: not known; then only the entry's own
 * instruction, or the one after endbr64.) */
uint64_t tls_at__fn_entry(const struct tls_image *img, uint64_t addr, uint64_t size,
			  uint8_t *how);

/* The same for the function named symbol in the ELF file bin, the one
 * libbpf attaches to by that name (its dynamic symbols, else its full
 * table; "write@@GLIBC_2.2.5" is write); -ENOENT when bin is no ELF file or
 * has no such function, or two, with *skip 0 and *how TLS_AT_ENTRY. */
int tls_at__fn_entry_elf(const char *bin, const char *symbol, uint64_t *skip, uint8_t *how);

/* "SSL_read", "SSL_read(_ex)", …: what a point stands for */
const char *tls_at__name(const struct tls_point *p);

#endif /* CRITPATH_RECORD_TLS_AT_H */
