// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * kp_tls_server: an HTTPS server built against OpenSSL (libssl), for record's
 * TLS plaintext capture. One thread accepts one connection at a time and
 * serves its HTTP/1.1 requests in order over TLS: each request computes
 * --work-ms of CPU, then answers 200 with a small body (404 for a path not
 * starting with /x). --ex uses SSL_read_ex / SSL_write_ex instead of
 * SSL_read / SSL_write. The certificate and key are PEM files (the test
 * makes a self-signed pair with the openssl CLI).
 *
 * Prints one line once ready: "READY pid=P port=N".
 *
 *   kp_tls_server --cert FILE --key FILE [--port N] [--work-ms MS] [--ex]
 */
#include <stdbool.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "kp_common.h"

static bool use_ex;

/* n bytes read into buf, 0 at the peer's close, -1 on an error. */
static int tls_read(SSL *ssl, char *buf, size_t cap)
{
	size_t got = 0;
	int n;

	if (!use_ex)
		return SSL_read(ssl, buf, (int)cap);
	n = SSL_read_ex(ssl, buf, cap, &got);
	if (n == 1)
		return (int)got;
	return SSL_get_error(ssl, n) == SSL_ERROR_ZERO_RETURN ? 0 : -1;
}

static bool tls_write(SSL *ssl, const char *buf, size_t len)
{
	size_t put = 0;

	if (!use_ex)
		return SSL_write(ssl, buf, (int)len) == (int)len;
	return SSL_write_ex(ssl, buf, len, &put) == 1 && put == len;
}

/* One request's head into buf (NUL-terminated); false at the end. */
static bool read_request(SSL *ssl, char *buf, size_t cap)
{
	size_t have = 0;

	while (have + 1 < cap) {
		int n = tls_read(ssl, buf + have, cap - 1 - have);

		if (n <= 0)
			return false;
		have += (size_t)n;
		buf[have] = 0;
		if (strstr(buf, "\r\n\r\n"))
			return true;
	}
	return false;
}

static void serve(SSL_CTX *ctx, int fd, double work_ms)
{
	char req[4096], reply[256];
	SSL *ssl = SSL_new(ctx);

	if (!ssl)
		kp_die("SSL_new failed");
	SSL_set_fd(ssl, fd);
	if (SSL_accept(ssl) != 1)
		goto out; /* a client that gave up on the handshake */
	while (read_request(ssl, req, sizeof(req))) {
		bool found = !strncmp(req, "GET /x", 6);
		int n;

		kp_spin_ms(work_ms);
		n = snprintf(
		    reply, sizeof(reply),
		    "HTTP/1.1 %s\r\nContent-Length: 3\r\nContent-Type: text/plain\r\n\r\nok\n",
		    found ? "200 OK" : "404 Not Found");
		if (!tls_write(ssl, reply, (size_t)n))
			break;
	}
	SSL_shutdown(ssl);
out:
	SSL_free(ssl);
	close(fd);
}

int main(int argc, char **argv)
{
	const char *cert = NULL, *key = NULL;
	double work_ms = 2;
	int port = 0, bound, lfd;
	SSL_CTX *ctx;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--cert") && i + 1 < argc)
			cert = argv[++i];
		else if (!strcmp(argv[i], "--key") && i + 1 < argc)
			key = argv[++i];
		else if (!strcmp(argv[i], "--port") && i + 1 < argc)
			port = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--work-ms") && i + 1 < argc)
			work_ms = atof(argv[++i]);
		else if (!strcmp(argv[i], "--ex"))
			use_ex = true;
		else
			kp_die("usage: kp_tls_server --cert FILE --key FILE [--port N] "
			       "[--work-ms MS] [--ex]");
	}
	if (!cert || !key)
		kp_die("kp_tls_server: --cert and --key are needed");
	ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx || SSL_CTX_use_certificate_file(ctx, cert, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
		ERR_print_errors_fp(stderr);
		kp_die("kp_tls_server: cannot load %s / %s", cert, key);
	}
	lfd = kp_listen(port, &bound);
	printf("READY pid=%d port=%d\n", (int)getpid(), bound);
	fflush(stdout);
	for (;;) {
		int fd = accept(lfd, NULL, NULL);

		if (fd < 0) {
			if (errno == EINTR)
				continue;
			kp_die("accept: %s", strerror(errno));
		}
		serve(ctx, fd, work_ms);
	}
}
