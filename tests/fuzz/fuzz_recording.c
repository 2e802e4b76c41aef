// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* libFuzzer harness: a recording (header, frames, trailer: cut, flipped or
 * made up) through the reader, the kernel-level analysis and the engine,
 * as `critpath report` takes it. A recording the reader refuses must say
 * why. An input whose last byte is 1 mod 8 is also read as a second host's
 * recording (its header's boot id or host changed, its realtime offset
 * the input's last 8 bytes), and both are analysed together: the hosts'
 * clocks placed by the messages between them, or by their offsets. One
 * whose last byte has bit 3 set is analysed as for an agent's store too
 * (every request's wire asked for), whose calls must point into their
 * request. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "engine.h"
#include "kpath.h"
#include "recfile_format.h"
#include "recording.h"

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

/* data as another host's recording in fd: the header's realtime offset the
 * input's last 8 bytes, a byte of its boot id (or host) changed, its CRC
 * made good (recfile_format.h: prefix, body, CRC). False when the header
 * has no string to change. */
static bool other_host(int fd, const uint8_t *data, size_t size)
{
	uint8_t *c;
	uint32_t body, n, crc;
	size_t at = REC_FILE_PREFIX + 32, name = 0; /* the strings, past the numbers */
	bool ok = false;

	if (size < REC_FILE_PREFIX + 8 || (body = get32(data + 12)) > size - REC_FILE_PREFIX - 4 ||
	    !(c = malloc(size)))
		return false;
	memcpy(c, data, size);
	/* agent version, command line, host, kernel, boot id */
	for (int i = 0; i < 5 && at + 4 <= REC_FILE_PREFIX + body; i++) {
		n = get32(c + at);
		at += 4;
		if (n == REC_STR_NULL)
			continue;
		if (n > REC_FILE_PREFIX + body - at)
			break;
		if (n && (i == 2 || i == 4))
			name = at;
		at += n;
	}
	if (name) {
		c[name] ^= 0x20;
		memcpy(c + REC_FILE_PREFIX + 8, data + size - 8, 8);
		crc = (uint32_t)crc32(0, c, REC_FILE_PREFIX + body);
		memcpy(c + REC_FILE_PREFIX + body, &crc, 4);
		ok = write(fd, c, size) == (ssize_t)size;
	}
	free(c);
	return ok;
}

/* the engine's sink, behind wired_request */
static struct cp_sink engine_sink;

static bool want_all(void *ctx, const struct cp_request *head)
{
	return true;
}

static int wired_request(void *ctx, const struct cp_request *r)
{
	const struct cp_request_wire *w = r->wire;

	if (!w || (w->ncalls && !w->calls))
		abort();
	for (uint32_t i = 0; i < w->ncalls; i++) {
		const struct cp_call *k = &w->calls[i];

		if (!k->local_addr || !k->remote_addr || strlen(k->local_addr) > 80 ||
		    strlen(k->remote_addr) > 80 || k->seg >= (int32_t)r->nsegs ||
		    (unsigned)k->category >= CP_CAT__COUNT)
			abort();
		if (k->seg >= 0 && (k->frames != r->segs[k->seg].frames ||
				    k->nframes != r->segs[k->seg].nframes))
			abort();
		if (i && k->start_ns < w->calls[i - 1].start_ns)
			abort();
	}
	return engine_sink.request(ctx, r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[] = "/tmp/critpath-fuzz-rec-XXXXXX", copy[] = "/tmp/critpath-fuzz-rec-XXXXXX";
	const char *paths[] = {path, copy};
	struct recording_reader *r = NULL;
	struct engine *e;
	int fd = mkstemp(path), npaths = 1;
	bool copied = false;

	if (fd < 0)
		return 0;
	if (write(fd, data, size) != (ssize_t)size) {
		close(fd);
		unlink(path);
		return 0;
	}
	close(fd);
	if (recording_reader__open(&r, path, RECORDING_TIME_ORDER) < 0) {
		const char *why = recording_reader__open_error();

		if (!why || !why[0])
			abort(); /* refused without saying why */
	} else {
		recording_reader__close(r);
		if ((data[size - 1] & 7) == 1 && (fd = mkstemp(copy)) >= 0) {
			copied = true;
			npaths = other_host(fd, data, size) ? 2 : 1;
			close(fd);
		}
	}
	e = engine__new(&(struct engine_opts){.keep_all_requests = true});
	if (e) {
		struct cp_sink sink = engine__sink(e);

		if (size && (data[size - 1] & 8)) {
			engine_sink = sink;
			sink.request = wired_request;
			sink.want = want_all;
		}
		engine__set_quiet(e, true);
		(void)kpath__analyze(paths, npaths, &sink, &(struct kpath_opts){.quiet = true});
		(void)engine__result(e);
		engine__free(e);
	}
	unlink(path);
	if (copied)
		unlink(copy);
	return 0;
}
