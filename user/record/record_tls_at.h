/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* Where OpenSSL's and --probe's functions are probed, without libbpf
 * (unit-tested). */
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

struct tls_point {
	uint64_t addr;
	uint8_t call;
	uint8_t how; /* enum tls_at_how */
	uint8_t fn;  /* enum tls_fn */
};

#define TLS_AT_MAX TLS_FN_N

bool tls_at__emulated(const uint8_t *code, size_t n);

int tls_at__plan(const struct tls_image *img, struct tls_point *pts);

int tls_at__plan_elf(const char *bin, struct tls_point *pts);

/* Where --probe's probes see each call for less: an emulated instruction on
 * straight code from the entry (*how TLS_AT_EMULATED), else 0 and
 * TLS_AT_ENTRY. */
uint64_t tls_at__fn_entry(const struct tls_image *img, uint64_t addr, uint64_t size,
			  uint8_t *how);

int tls_at__fn_entry_elf(const char *bin, const char *symbol, uint64_t *skip, uint8_t *how);

/* "SSL_read", "SSL_read(_ex)", …: what a point stands for */
const char *tls_at__name(const struct tls_point *p);

#endif /* CRITPATH_RECORD_TLS_AT_H */
