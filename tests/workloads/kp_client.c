// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * kp_client: sends a bounded number of HTTP/1.1 requests to a kp_server, one
 * at a time on one keep-alive connection, with a gap between them. With
 * --period-ms, each request is sent at --phase-ms past a multiple of the
 * period on CLOCK_MONOTONIC (kp_server --mode lock's background thread takes
 * its lock on the same grid). Prints each latency and then
 * "DONE n=N p50_ms=X min_ms=X max_ms=X".
 *
 *   kp_client --port N [--n 20] [--gap-ms 30] [--period-ms P --phase-ms F]
 */
#include "kp_common.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int port = 0, n = 20, fd;
	double gap_ms = 30, period_ms = 0, phase_ms = 0, *lat;
	char buf[4096], req[128];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--port") && i + 1 < argc)
			port = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--n") && i + 1 < argc)
			n = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--gap-ms") && i + 1 < argc)
			gap_ms = atof(argv[++i]);
		else if (!strcmp(argv[i], "--period-ms") && i + 1 < argc)
			period_ms = atof(argv[++i]);
		else if (!strcmp(argv[i], "--phase-ms") && i + 1 < argc)
			phase_ms = atof(argv[++i]);
		else
			port = 0, i = argc;
	}
	if (!port || n <= 0)
		kp_die("usage: kp_client --port N [--n 20] [--gap-ms 30] "
		       "[--period-ms P --phase-ms F]");
	lat = calloc((size_t)n, sizeof(*lat));
	if (!lat)
		kp_die("out of memory");
	fd = kp_connect(port);
	for (int i = 0; i < n; i++) {
		uint64_t t0;

		if (i)
			kp_sleep_ms(gap_ms);
		if (period_ms > 0) {
			uint64_t p = (uint64_t)(period_ms * 1e6), f = (uint64_t)(phase_ms * 1e6);
			uint64_t now = kp_now_ns(), at = now / p * p + f;

			while (at <= now)
				at += p;
			kp_sleep_until(at);
		}
		snprintf(req, sizeof(req), "GET /kp/%d HTTP/1.1\r\nHost: kp\r\n\r\n", i);
		t0 = kp_now_ns();
		kp_write_all(fd, req, strlen(req));
		if (!kp_read_until(fd, buf, sizeof(buf), "ok\n"))
			kp_die("kp_client: server closed the connection at request %d", i);
		lat[i] = (double)(kp_now_ns() - t0) / 1e6;
		printf("req %d lat_ms=%.3f\n", i, lat[i]);
	}
	close(fd);
	qsort(lat, (size_t)n, sizeof(*lat), cmp_double);
	printf("DONE n=%d p50_ms=%.3f min_ms=%.3f max_ms=%.3f\n", n, lat[n / 2], lat[0],
	       lat[n - 1]);
	free(lat);
	return 0;
}
