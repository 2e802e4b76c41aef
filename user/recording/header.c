// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The file header: magic, version, CRC, lengths checked. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "recfile.h"
#include "recfile_format.h"
#include "recording.h"

__thread char recfile_open_error[RECFILE_OPEN_ERROR_LEN];

const char *recording_reader__open_error(void)
{
	return recfile_open_error;
}

ssize_t recfile__read_at(int fd, void *buf, size_t len, uint64_t off)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		got += n;
	}
	return (ssize_t)got;
}

struct cursor {
	const uint8_t *p, *end;
	bool bad;
};

static uint32_t cur_u32(struct cursor *c)
{
	if (c->end - c->p < 4) {
		c->bad = true;
		return 0;
	}
	c->p += 4;
	return rec_get32(c->p - 4);
}

static uint64_t cur_u64(struct cursor *c)
{
	if (c->end - c->p < 8) {
		c->bad = true;
		return 0;
	}
	c->p += 8;
	return rec_get64(c->p - 8);
}

static const char *cur_str(struct cursor *c, char **dst)
{
	uint32_t n = cur_u32(c);
	char *s = *dst;

	if (c->bad || n == REC_STR_NULL)
		return NULL;
	if ((size_t)(c->end - c->p) < n) {
		c->bad = true;
		return NULL;
	}
	memcpy(s, c->p, n);
	s[n] = 0;
	c->p += n;
	*dst += n + 1;
	return s;
}

int recfile__read_header(int fd, const char *path, struct recording_info *info, char **strings,
			 struct recording_cpu **cpus, uint64_t *data_off)
{
	uint8_t pre[REC_FILE_PREFIX];
	uint8_t *body = NULL;
	uint32_t body_len, version;
	ssize_t n;
	int err = 0;

	n = recfile__read_at(fd, pre, sizeof(pre), 0);
	if (n < 0) {
		snprintf(recfile_open_error, sizeof(recfile_open_error), "%s: %s", path,
			 strerror((int)-n));
		return (int)n;
	}
	if (n == 0) {
		snprintf(recfile_open_error, sizeof(recfile_open_error),
			 "%s: empty file, not a recording", path);
		return -EPROTO;
	}
	if (memcmp(pre, REC_MAGIC, n < REC_MAGIC_LEN ? n : REC_MAGIC_LEN)) {
		snprintf(recfile_open_error, sizeof(recfile_open_error),
			 "%s: not a critpath recording (no CRITPREC magic)", path);
		return -EPROTO;
	}
	if (n < (ssize_t)sizeof(pre)) {
		snprintf(recfile_open_error, sizeof(recfile_open_error),
			 "%s: cut short in the header: %zd of at least %zu bytes present", path, n,
			 sizeof(pre));
		return -ENODATA;
	}
	version = rec_get32(pre + 8);
	body_len = rec_get32(pre + 12);
	if (version < RECORDING_FORMAT_VERSION_MIN || version > RECORDING_FORMAT_VERSION) {
		snprintf(recfile_open_error, sizeof(recfile_open_error),
			 "%s: recording format version %u, this critpath reads versions %u to %u",
			 path, version, RECORDING_FORMAT_VERSION_MIN, RECORDING_FORMAT_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (body_len > REC_HEADER_BODY_MAX) {
		snprintf(recfile_open_error, sizeof(recfile_open_error),
			 "%s: corrupted header: body of %u bytes (at most %u)", path, body_len,
			 REC_HEADER_BODY_MAX);
		return -EBADMSG;
	}
	body = malloc(REC_FILE_PREFIX + body_len + 4);
	/* Strings: at most body_len bytes plus one NUL per string. */
	*strings = malloc(body_len + 6 + REC_MAX_CPUS);
	if (!body || !*strings) {
		err = -ENOMEM;
		snprintf(recfile_open_error, sizeof(recfile_open_error), "%s: out of memory", path);
		goto cleanup;
	}
	memcpy(body, pre, REC_FILE_PREFIX);
	n = recfile__read_at(fd, body + REC_FILE_PREFIX, body_len + 4, REC_FILE_PREFIX);
	if (n < 0) {
		err = (int)n;
		snprintf(recfile_open_error, sizeof(recfile_open_error), "%s: %s", path,
			 strerror(-err));
		goto cleanup;
	}
	if (n < (ssize_t)body_len + 4) {
		snprintf(recfile_open_error, sizeof(recfile_open_error),
			 "%s: cut short in the header: %zd of %u bytes present", path,
			 REC_FILE_PREFIX + n, REC_FILE_PREFIX + body_len + 4);
		err = -ENODATA;
		goto cleanup;
	}
	if (crc32(0, body, REC_FILE_PREFIX + body_len) !=
	    rec_get32(body + REC_FILE_PREFIX + body_len)) {
		snprintf(recfile_open_error, sizeof(recfile_open_error),
			 "%s: corrupted header: checksum mismatch", path);
		err = -EBADMSG;
		goto cleanup;
	}

	struct cursor c = {body + REC_FILE_PREFIX, body + REC_FILE_PREFIX + body_len};
	char *s = *strings;

	info->format_version = version;
	cur_u32(&c); /* abi_version: records are self-describing by type and size */
	info->codec = cur_u32(&c) & REC_HDR_F_LZ4 ? RECORDING_LZ4 : RECORDING_ZSTD; /* flags */
	info->realtime_offset_ns = (int64_t)cur_u64(&c);
	info->start_ns = cur_u64(&c);
	info->payload_bytes = cur_u32(&c);
	info->ncpus = cur_u32(&c);
	info->agent_version = cur_str(&c, &s);
	info->cmdline = cur_str(&c, &s);
	info->host = cur_str(&c, &s);
	info->kernel = cur_str(&c, &s);
	info->boot_id = cur_str(&c, &s);
	info->sku = cur_str(&c, &s);
	if (!c.bad && info->ncpus > REC_MAX_CPUS) {
		snprintf(recfile_open_error, sizeof(recfile_open_error),
			 "%s: corrupted header: %u CPUs (at most %u)", path, info->ncpus,
			 REC_MAX_CPUS);
		err = -EBADMSG;
		goto cleanup;
	}
	if (!c.bad && info->ncpus) {
		*cpus = calloc(info->ncpus, sizeof(**cpus));
		if (!*cpus) {
			err = -ENOMEM;
			snprintf(recfile_open_error, sizeof(recfile_open_error),
				 "%s: out of memory", path);
			goto cleanup;
		}
	}
	for (uint32_t i = 0; !c.bad && i < info->ncpus; i++) {
		struct recording_cpu *cpu = &(*cpus)[i];
		const char *model;

		cpu->cpu = (int)cur_u32(&c);
		cpu->mhz = cur_u32(&c);
		cpu->capacity = cur_u32(&c);
		model = cur_str(&c, &s);
		if (model)
			snprintf(cpu->model, sizeof(cpu->model), "%s", model);
	}
	info->cpus = *cpus;
	if (c.bad) {
		snprintf(recfile_open_error, sizeof(recfile_open_error),
			 "%s: corrupted header: its fields overrun its %u bytes", path, body_len);
		err = -EBADMSG;
		goto cleanup;
	}
	*data_off = REC_FILE_PREFIX + body_len + 4;
cleanup:
	free(body);
	return err;
}
