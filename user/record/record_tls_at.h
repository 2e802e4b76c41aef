/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* Where OpenSSL's and --probe's functions are probed: a plan from a library's
 * code, without libbpf, so unit tests can run it. */
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
	/* SSL_do_handshake: where an SSL * begins a connection */
	TLS_FN_HANDSHAKE,
	TLS_FN_N,
};

/* A library's code by address and its functions' addresses (0: absent); read
 * copies up to n bytes at addr. */
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

/* One uprobe and uretprobe at addr with call as cookie; fn is the function it
 * stands for. */
struct tls_point {
	uint64_t addr;
	uint8_t call;
	uint8_t how; /* enum tls_at_how */
	uint8_t fn;  /* enum tls_fn */
};

#define TLS_AT_MAX TLS_FN_N

/* The kernel's uprobes emulate this instruction instead of single-stepping it. */
bool tls_at__emulated(const uint8_t *code, size_t n);

/* The points for img's functions into pts (TLS_AT_MAX at most); their
 * number, or -ENOENT when SSL_read or SSL_write is absent. */
int tls_at__plan(const struct tls_image *img, struct tls_point *pts);

/* The same for the ELF file bin, with file offsets (what a uprobe is
 * attached at) in pts[].addr; -ENOENT also when bin is no ELF file. */
int tls_at__plan_elf(const char *bin, struct tls_point *pts);

/* Where probes that read no register (--probe) see each call of the function at
 * addr for less: an emulated instruction reached on straight code from the
 * entry, stack pointer untouched, not jumped back into (*how TLS_AT_EMULATED);
 * else 0 and TLS_AT_ENTRY. */
uint64_t tls_at__fn_entry(const struct tls_image *img, uint64_t addr, uint64_t size,
			  uint8_t *how);

/* The same for symbol in ELF file bin, as libbpf resolves it; -ENOENT when
 * absent or ambiguous. */
int tls_at__fn_entry_elf(const char *bin, const char *symbol, uint64_t *skip, uint8_t *how);

/* "SSL_read", "SSL_read(_ex)", …: what a point stands for */
const char *tls_at__name(const struct tls_point *p);

#endif /* CRITPATH_RECORD_TLS_AT_H */
