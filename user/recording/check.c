// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* Record validation: what the reader checks before anyone reads a field. */
#include <stddef.h>

#include "recfile.h"
#include "recording.h"

size_t recfile__min_size(uint16_t type)
{
	switch (type) {
#define MIN_SIZE(t, name, size)                                                                    \
	case t:                                                                                    \
		return size;
		CP_EVENT_TYPES(MIN_SIZE)
		CP_META_TYPES(MIN_SIZE)
#undef MIN_SIZE
	default:
		return sizeof(struct cp_hdr);
	}
}

const char *recfile__check_walk(const struct cp_hdr *rec, size_t avail)
{
	if (avail < sizeof(*rec))
		return "fewer than 24 bytes left for a record";
	if (rec->size < sizeof(*rec))
		return "size below 24";
	if (rec->size % 8)
		return "size not a multiple of 8";
	if (rec->size > avail)
		return "size overruns the frame";
	return NULL;
}

const char *recfile__check_type(struct cp_hdr *rec, bool fix)
{
	if (rec->size < recfile__min_size(rec->type))
		return "size too small for its type";

	switch (rec->type) {
	case CP_EV_PROCESS_EXEC: {
		struct cp_ev_process_exec *e = (void *)rec;

		if (e->filename_len >= CP_FILENAME_MAX ||
		    offsetof(struct cp_ev_process_exec, filename) + e->filename_len + 1u >
			rec->size)
			return "filename_len overruns the record";
		if (fix)
			e->filename[e->filename_len] = 0;
		break;
	}
	case CP_EV_SOCK: {
		struct cp_ev_sock *s = (void *)rec;

		if (s->payload_len > CP_PAYLOAD_MAX ||
		    offsetof(struct cp_ev_sock, payload) + s->payload_len > rec->size)
			return "payload_len overruns the record";
		break;
	}
	case CP_EV_TLS_READ: {
		struct cp_ev_tls_read *t = (void *)rec;

		if (t->payload_len > CP_PAYLOAD_MAX ||
		    offsetof(struct cp_ev_tls_read, payload) + t->payload_len > rec->size)
			return "payload_len overruns the record";
		break;
	}
	case CP_MD_PROCESS: {
		struct cp_md_process *p = (void *)rec;

		if (sizeof(*p) + (size_t)p->exe_len + p->cmdline_len > rec->size)
			return "exe and cmdline overrun the record";
		break;
	}
	case CP_MD_HOOK: {
		struct cp_md_hook *h = (void *)rec;

		if (fix) {
			h->name[sizeof(h->name) - 1] = 0;
			h->detail[sizeof(h->detail) - 1] = 0;
		}
		break;
	}
	case CP_MD_PROBE: {
		struct cp_md_probe *p = (void *)rec;

		if (fix) {
			p->binary[sizeof(p->binary) - 1] = 0;
			p->symbol[sizeof(p->symbol) - 1] = 0;
		}
		break;
	}
	}
	return NULL;
}
