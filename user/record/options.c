// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "proto.h"
#include "record_int.h"
#include "util.h"

void rec_opts__usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: critpath record -p PID[,PID..] [-p ...] [options]\n"
	    "       critpath record [options] -- CMD [ARGS..]\n"
	    "  -p PID              a process and the ones under it (its children, theirs, and\n"
	    "                      the ones they start while recording)\n"
	    "  -o FILE             output (default critpath.rec, created 0600)\n"
	    "  -d SECONDS          stop after this long (default: Ctrl-C or all targets exit)\n"
	    "  --buffer-mb N       ring buffers in MiB, a power of 2, split between the CPUs "
	    "(default 8:\n"
	    "                      small rings stay in the CPUs' caches, and cost the\n"
	    "                      traced threads less per record)\n"
	    "  --payload-bytes N   payload prefix kept to name requests, 0-%d (default %d; %d\n"
	    "                      on HTTP/2, whose frame headers and naming header fields\n"
	    "                      are kept past it). Never kept: HTTP header values other\n"
	    "                      than naming and framing ones (Authorization, Cookie:\n"
	    "                      their length only), HTTP/2 DATA past the first N bytes\n"
	    "  --sku LABEL         label this machine's CPU model in the recording\n"
	    "  --host NAME         the host's name in the recording (default: the hostname);\n"
	    "                      name each when network namespaces or containers of one\n"
	    "                      kernel are recorded as hosts of their own\n"
	    "  --clock-skew DUR    a testing aid: add DUR (\"3ms\", \"-250us\") to every time\n"
	    "                      written, as if this host's clock were off by it\n"
	    "  --compress C        lz4 (default) or zstd: zstd's files are about 0.6 times\n"
	    "                      the size, for more CPU here and in report\n"
	    "  --all-syscalls      record every futex, socket and poll call (from raw_syscalls;\n"
	    "                      costlier: by default only calls that block or move data)\n"
	    "  --probe [BIN:]FUNC  a function as a subcomponent of the critical path: its\n"
	    "                      calls become frames (uprobes; BIN: a binary or library,\n"
	    "                      default the targets' executables; repeat for more)\n"
	    "  --no-tls            no TLS plaintext capture (by default OpenSSL's SSL_read and\n"
	    "                      SSL_write are probed in targets that map libssl)\n"
	    "  --redact-query KEY  a query key whose values are secret, beside the built-in\n"
	    "                      ones (token, password, Signature...); repeatable\n"
	    "  --keep-query        record credential query values (by default each byte is *)\n"
	    "  -q                  no notes on stderr, only errors and the summary\n",
	    CP_PAYLOAD_MAX, CP_PAYLOAD_DEFAULT, CP_PAYLOAD_MAX);
}

int rec_redact_query_opt(const char *cmd, const char *key)
{
	int err = proto__redact_query_add(key);

	if (err == -E2BIG)
		cp_error(cmd, "--redact-query: at most %d keys", PROTO_MAX_QUERY_KEYS);
	else if (err)
		cp_error(cmd, "--redact-query '%s': expected a query key, without &, =, ? or #",
			 key);
	return err;
}

bool rec_parse_uint(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || !*s || s[0] == '-' || v > max)
		return false;
	*out = v;
	return true;
}

static int parse_pids(struct rec_opts *o, const char *arg)
{
	char *copy = strdup(arg), *save = NULL, *tok;
	int err = 0;

	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *end;
		long v = strtol(tok, &end, 10);

		if (*end || v <= 0 || v > INT_MAX) {
			cp_error(rec_cmd, "-p: '%s' is not a process id", tok);
			err = -EINVAL;
			break;
		}
		if (o->npids >= REC_MAX_TARGETS) {
			cp_error(rec_cmd, "-p: more than %d targets",
				REC_MAX_TARGETS);
			err = -E2BIG;
			break;
		}
		o->pids[o->npids++] = (pid_t)v;
	}
	free(copy);
	return err;
}

int rec_probe_spec_check(const char *spec)
{
	const char *colon = strrchr(spec, ':');
	const char *sym = colon ? colon + 1 : spec;
	size_t blen = colon ? (size_t)(colon - spec) : 0;

	if (!*sym || (colon && !blen)) {
		cp_error(rec_cmd, "--probe '%s': expected [BINARY:]FUNCTION",
			spec);
		return -EINVAL;
	}
	if (strlen(sym) >= REC_PROBE_SYMBOL || blen >= REC_PROBE_BINARY) {
		cp_error(rec_cmd, "--probe '%s': name too long", spec);
		return -EINVAL;
	}
	return 0;
}


const char *rec_cmd = "record";

/* A host name: printable, no blanks, short. */
static int host_name_check(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > REC_MAX_HOST) {
		cp_error(rec_cmd, "--host: '%s' is not a name of 1 to %d characters",
			s, REC_MAX_HOST);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c <= ' ' || c == 0x7f) {
			cp_error(rec_cmd,
				"--host: '%s' has a blank or control character at "
				"%zu",
				s, i + 1);
			return -EINVAL;
		}
	}
	return 0;
}

static int bad(const char *opt, const char *arg, const char *want)
{
	cp_error(rec_cmd, "%s: '%s' is not %s", opt, arg, want);
	return 2;
}

int rec_opts__parse(struct rec_opts *o, int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"pid", required_argument, NULL, 'p'},
	    {"output", required_argument, NULL, 'o'},
	    {"duration", required_argument, NULL, 'd'},
	    {"buffer-mb", required_argument, NULL, 'B'},
	    {"payload-bytes", required_argument, NULL, 'P'},
	    {"sku", required_argument, NULL, 'S'},
	    {"host", required_argument, NULL, 'H'},
	    {"clock-skew", required_argument, NULL, 'K'},
	    {"compress", required_argument, NULL, 'C'},
	    {"empty-programs", no_argument, NULL, 'E'},
	    {"all-syscalls", no_argument, NULL, 'A'},
	    {"probe", required_argument, NULL, 'U'},
	    {"no-tls", no_argument, NULL, 'T'},
	    {"redact-query", required_argument, NULL, 'R'},
	    {"keep-query", no_argument, NULL, 'Q'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	unsigned long v;
	char *end;
	int opt;

	memset(o, 0, sizeof(*o));
	o->out = "critpath.rec";
	o->codec = RECORDING_LZ4;
	o->bo = (struct rec_bpf_opts){.payload_bytes = CP_PAYLOAD_DEFAULT,
				      .h2_payload_bytes = CP_PAYLOAD_MAX,
				      .buffer_mb = 8,
				      .tls = true};
	optind = 1;
	while ((opt = getopt_long(argc, argv, "+p:o:d:qh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'p':
			if (parse_pids(o, optarg))
				return 2;
			break;
		case 'o':
			o->out = optarg;
			break;
		case 'd':
			o->duration = strtod(optarg, &end);
			if (*end || !(o->duration > 0))
				return bad("-d", optarg, "a positive number of seconds");
			break;
		case 'B':
			if (!rec_parse_uint(optarg, 4096, &v) || v == 0 || (v & (v - 1)))
				return bad("--buffer-mb", optarg, "a power of 2 between 1 and 4096");
			o->bo.buffer_mb = v;
			break;
		case 'P':
			if (!rec_parse_uint(optarg, CP_PAYLOAD_MAX, &v)) {
				cp_error(rec_cmd,
					"--payload-bytes: '%s' is not a number "
					"between 0 and %d",
					optarg, CP_PAYLOAD_MAX);
				return 2;
			}
			o->bo.payload_bytes = o->bo.h2_payload_bytes = v;
			break;
		case 'S':
			o->sku = optarg;
			break;
		case 'H':
			if (host_name_check(optarg))
				return 2;
			o->host = optarg;
			break;
		case 'K': {
			bool neg = optarg[0] == '-';
			uint64_t ns;

			if (parse_duration(optarg + neg, &ns) || ns > REC_MAX_SKEW_NS)
				return bad("--clock-skew", optarg,
					   "a duration of at most an hour (\"3ms\", \"-250us\")");
			o->clock_skew_ns = neg ? -(int64_t)ns : (int64_t)ns;
			break;
		}
		case 'C':
			if (!strcmp(optarg, recording_codec_name(RECORDING_LZ4)))
				o->codec = RECORDING_LZ4;
			else if (!strcmp(optarg, recording_codec_name(RECORDING_ZSTD)))
				o->codec = RECORDING_ZSTD;
			else
				return bad("--compress", optarg, "lz4 or zstd");
			break;
		case 'E':
			o->bo.empty_programs = true;
			break;
		case 'A':
			o->bo.all_syscalls = true;
			break;
		case 'U':
			if (rec_probe_spec_check(optarg))
				return 2;
			if (o->nprobes >= REC_MAX_PROBES) {
				cp_error(rec_cmd, "--probe: at most %d probes",
					REC_MAX_PROBES);
				return 2;
			}
			o->probes[o->nprobes++] = optarg;
			o->bo.probes = true;
			break;
		case 'T':
			o->bo.tls = false;
			break;
		case 'R':
			if (rec_redact_query_opt(rec_cmd, optarg))
				return 2;
			break;
		case 'Q':
			o->keep_query = true;
			break;
		case 'q':
			o->quiet = o->bo.quiet = true;
			break;
		case 'h':
			rec_opts__usage(stdout);
			return 1;
		default:
			rec_opts__usage(stderr);
			return 2;
		}
	}
	if ((optind < argc) == (o->npids > 0)) {
		cp_error(rec_cmd, "%s",
			 o->npids ? "give -p PID or -- CMD, not both"
				  : "nothing to record: give -p PID or -- CMD");
		rec_opts__usage(stderr);
		return 2;
	}
	o->cmd = optind < argc ? argv + optind : NULL;
	return 0;
}
