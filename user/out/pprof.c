// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* --format pprof: the profile as gzipped profile.proto. A sample per entry,
 * leaf first (the category, or the deepest span); a Function and Location per
 * frame name so equal names merge. Values: total ns, request count, per-request
 * ns. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "engine.h"
#include "profile.pb-c.h"
#include "util.h"

#define PPROF_NVALUES 3

/* string → string_table index, through util's index */
struct strtab {
	char **strs; /* string_table, strs[0] = "" */
	uint32_t n, cap;
	struct index ix;
};

static uint64_t strtab__hash_of(const void *ctx, uint32_t i)
{
	return hash__cstr(((const struct strtab *)ctx)->strs[i]);
}

struct strtab_key {
	const struct strtab *t;
	const char *s;
};

static bool strtab__eq(const void *ctx, uint32_t i)
{
	const struct strtab_key *k = ctx;

	return !strcmp(k->t->strs[i], k->s);
}

/* The index of s, added when new; -errno on failure. The table points at s,
 * which must outlive it (engine results do). */
static int64_t strtab__get(struct strtab *t, const char *s)
{
	struct strtab_key k = {t, s ? s : ""};
	uint32_t *slot;
	int err;

	err = index__reserve_more(&t->ix, t->n, 1, strtab__hash_of, t);
	if (err)
		return err;
	slot = index__find(&t->ix, hash__cstr(k.s), strtab__eq, &k);
	if (*slot)
		return *slot - 1;
	err = grow_array((void **)&t->strs, &t->cap, t->n + 1, sizeof(*t->strs), 64);
	if (err)
		return err;
	t->strs[t->n] = (char *)k.s;
	*slot = ++t->n;
	return t->n - 1;
}

static void strtab__free(struct strtab *t)
{
	free(t->strs);
	free(t->ix.slots);
}

/* Everything a Profile message points at, in a few flat arrays. */
struct pprof_build {
	struct strtab st;
	Perftools__Profiles__Profile prof;
	Perftools__Profiles__ValueType vt[PPROF_NVALUES];
	Perftools__Profiles__ValueType *vtp[PPROF_NVALUES];
	Perftools__Profiles__Sample *samples;
	Perftools__Profiles__Sample **samplep;
	Perftools__Profiles__Label *labels; /* one per sample: its category */
	Perftools__Profiles__Label **labelp;
	uint64_t *locids;      /* all samples' stacks, back to back */
	int64_t *values;       /* PPROF_NVALUES per sample */
	uint32_t *func_of_str; /* string index → function id, 0 = none */
	uint32_t nfunc_of_str;
	Perftools__Profiles__Function *funcs;
	Perftools__Profiles__Function **funcp;
	Perftools__Profiles__Location *locs;
	Perftools__Profiles__Location **locp;
	Perftools__Profiles__Line *lines;
	Perftools__Profiles__Line **linep;
	uint32_t nfuncs, capfuncs;
	int64_t comments[4];
	char comment_buf[3][160];
};

/* The location id (= function id) for a frame name. */
static int64_t pprof__location(struct pprof_build *b, const char *name)
{
	int64_t s = strtab__get(&b->st, name && *name ? name : "?");

	if (s < 0)
		return s;
	if ((uint32_t)s >= b->nfunc_of_str) {
		uint32_t n = b->nfunc_of_str ? b->nfunc_of_str : 64;
		uint32_t *m;

		while (n <= (uint32_t)s)
			n *= 2;
		m = realloc(b->func_of_str, n * sizeof(*m));
		if (!m)
			return -ENOMEM;
		memset(m + b->nfunc_of_str, 0, (n - b->nfunc_of_str) * sizeof(*m));
		b->func_of_str = m;
		b->nfunc_of_str = n;
	}
	if (b->func_of_str[s])
		return b->func_of_str[s];
	if (b->nfuncs == b->capfuncs)
		return -ENOSPC; /* sized up front: cannot happen */
	b->funcs[b->nfuncs] = (Perftools__Profiles__Function)PERFTOOLS__PROFILES__FUNCTION__INIT;
	b->funcs[b->nfuncs].id = b->nfuncs + 1;
	b->funcs[b->nfuncs].name = s;
	b->funcs[b->nfuncs].system_name = s;
	b->lines[b->nfuncs] = (Perftools__Profiles__Line)PERFTOOLS__PROFILES__LINE__INIT;
	b->lines[b->nfuncs].function_id = b->nfuncs + 1;
	b->linep[b->nfuncs] = &b->lines[b->nfuncs];
	b->locs[b->nfuncs] = (Perftools__Profiles__Location)PERFTOOLS__PROFILES__LOCATION__INIT;
	b->locs[b->nfuncs].id = b->nfuncs + 1;
	b->locs[b->nfuncs].n_line = 1;
	b->locs[b->nfuncs].line = &b->linep[b->nfuncs];
	b->funcp[b->nfuncs] = &b->funcs[b->nfuncs];
	b->locp[b->nfuncs] = &b->locs[b->nfuncs];
	b->nfuncs++;
	b->func_of_str[s] = b->nfuncs;
	return b->nfuncs;
}

static int pprof__alloc(struct pprof_build *b, const struct engine_result *r)
{
	size_t nframes = 0;
	uint32_t i;

	for (i = 0; i < r->nprofile; i++)
		nframes += r->profile[i].nframes + 1;
	/* at most one function per frame occurrence, plus the categories */
	b->capfuncs = nframes + CP_CAT__COUNT + 1;
	b->samples = calloc(r->nprofile + 1, sizeof(*b->samples));
	b->samplep = calloc(r->nprofile + 1, sizeof(*b->samplep));
	b->labels = calloc(r->nprofile + 1, sizeof(*b->labels));
	b->labelp = calloc(r->nprofile + 1, sizeof(*b->labelp));
	b->values = calloc((size_t)PPROF_NVALUES * (r->nprofile + 1), sizeof(*b->values));
	b->locids = calloc(nframes + 1, sizeof(*b->locids));
	b->funcs = calloc(b->capfuncs, sizeof(*b->funcs));
	b->funcp = calloc(b->capfuncs, sizeof(*b->funcp));
	b->locs = calloc(b->capfuncs, sizeof(*b->locs));
	b->locp = calloc(b->capfuncs, sizeof(*b->locp));
	b->lines = calloc(b->capfuncs, sizeof(*b->lines));
	b->linep = calloc(b->capfuncs, sizeof(*b->linep));
	if (!b->samples || !b->samplep || !b->labels || !b->labelp || !b->values || !b->locids ||
	    !b->funcs || !b->funcp || !b->locs || !b->locp || !b->lines || !b->linep)
		return -ENOMEM;
	return 0;
}

static void pprof__free(struct pprof_build *b)
{
	strtab__free(&b->st);
	free(b->samples);
	free(b->samplep);
	free(b->labels);
	free(b->labelp);
	free(b->values);
	free(b->locids);
	free(b->func_of_str);
	free(b->funcs);
	free(b->funcp);
	free(b->locs);
	free(b->locp);
	free(b->lines);
	free(b->linep);
}

static int pprof__value_types(struct pprof_build *b)
{
	static const char *const names[PPROF_NVALUES][2] = {
	    {"critical_path", "nanoseconds"},
	    {"requests", "count"},
	    {"per_request", "nanoseconds"},
	};
	int64_t t, u;
	int i;

	for (i = 0; i < PPROF_NVALUES; i++) {
		t = strtab__get(&b->st, names[i][0]);
		u = strtab__get(&b->st, names[i][1]);
		if (t < 0 || u < 0)
			return -ENOMEM;
		b->vt[i] = (Perftools__Profiles__ValueType)PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
		b->vt[i].type = t;
		b->vt[i].unit = u;
		b->vtp[i] = &b->vt[i];
	}
	b->prof.n_sample_type = PPROF_NVALUES;
	b->prof.sample_type = b->vtp;
	b->prof.default_sample_type = b->vt[0].type;
	return 0;
}

static int pprof__samples(struct pprof_build *b, const struct engine_result *r)
{
	uint64_t *loc = b->locids;
	int64_t id, key;
	uint32_t i, j;

	key = strtab__get(&b->st, "category");
	if (key < 0)
		return key;
	for (i = 0; i < r->nprofile; i++) {
		const struct engine_profile_entry *pe = &r->profile[i];
		Perftools__Profiles__Sample *s = &b->samples[i];
		int64_t *v = &b->values[(size_t)i * PPROF_NVALUES];
		const char *cat = cp_category_name(pe->category);

		*s = (Perftools__Profiles__Sample)PERFTOOLS__PROFILES__SAMPLE__INIT;
		s->location_id = loc;
		/* span input: the span is the leaf (its flat time is its
		 * exclusive time) */
		if (pe->category != CP_CAT_SPAN || !pe->nframes) {
			id = pprof__location(b, cat);
			if (id < 0)
				return id;
			*loc++ = id;
		}
		for (j = pe->nframes; j-- > 0;) {
			id = pprof__location(b, pe->frames[j]);
			if (id < 0)
				return id;
			*loc++ = id;
		}
		s->n_location_id = loc - s->location_id;
		v[0] = (int64_t)pe->total_ns;
		v[1] = pe->requests;
		v[2] = r->nrequests ? (int64_t)(pe->total_ns / r->nrequests) : 0;
		s->n_value = PPROF_NVALUES;
		s->value = v;
		b->labels[i] = (Perftools__Profiles__Label)PERFTOOLS__PROFILES__LABEL__INIT;
		b->labels[i].key = key;
		b->labels[i].str = strtab__get(&b->st, cat);
		if (b->labels[i].str < 0)
			return -ENOMEM;
		b->labelp[i] = &b->labels[i];
		s->n_label = 1;
		s->label = &b->labelp[i];
		b->samplep[i] = s;
	}
	b->prof.n_sample = r->nprofile;
	b->prof.sample = b->samplep;
	return 0;
}

static int pprof__comments(struct pprof_build *b, const struct engine_result *r,
			   const struct out_opts *o)
{
	size_t n = 0;
	int64_t s;

	if (o && o->title) {
		s = strtab__get(&b->st, o->title);
		if (s < 0)
			return s;
		b->comments[n++] = s;
	}
	snprintf(b->comment_buf[0], sizeof(b->comment_buf[0]), "critpath: %llu requests",
		 (unsigned long long)r->nrequests);
	snprintf(b->comment_buf[1], sizeof(b->comment_buf[1]),
		 "end-to-end latency P50 %.3f ms, P95 %.3f ms, P99 %.3f ms, max %.3f ms",
		 r->latency_pct_ns[0] / 1e6, r->latency_pct_ns[1] / 1e6, r->latency_pct_ns[2] / 1e6,
		 r->max_latency_ns / 1e6);
	snprintf(b->comment_buf[2], sizeof(b->comment_buf[2]),
		 "sample_index=per_request gives the average critical path per request");
	for (int i = 0; i < 3; i++) {
		s = strtab__get(&b->st, b->comment_buf[i]);
		if (s < 0)
			return s;
		b->comments[n++] = s;
	}
	b->prof.n_comment = n;
	b->prof.comment = b->comments;
	return 0;
}

/* gzip (windowBits 31 = deflate with a gzip header and trailer) */
static int pprof__write_gzip(FILE *f, const uint8_t *buf, size_t len)
{
	unsigned char out[16384];
	z_stream zs = {0};
	int zerr, err = 0;
	size_t have;

	if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	zs.next_in = (Bytef *)buf;
	zs.avail_in = len;
	do {
		zs.next_out = out;
		zs.avail_out = sizeof(out);
		zerr = deflate(&zs, Z_FINISH);
		if (zerr == Z_STREAM_ERROR) {
			err = -EIO;
			goto cleanup;
		}
		have = sizeof(out) - zs.avail_out;
		if (have && fwrite(out, 1, have, f) != have) {
			err = -errno ?: -EIO;
			goto cleanup;
		}
	} while (zerr != Z_STREAM_END);
cleanup:
	deflateEnd(&zs);
	return err;
}

int out_pprof(FILE *f, const struct engine_result *r, const struct out_opts *o)
{
	struct pprof_build *b;
	uint8_t *buf = NULL;
	size_t len;
	int err;

	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	perftools__profiles__profile__init(&b->prof);
	err = pprof__alloc(b, r);
	if (err)
		goto cleanup;
	/* pprof requires string_table[0] == "" */
	err = strtab__get(&b->st, "");
	if (err)
		goto cleanup;
	err = pprof__value_types(b);
	if (err)
		goto cleanup;
	err = pprof__samples(b, r);
	if (err)
		goto cleanup;
	err = pprof__comments(b, r, o);
	if (err)
		goto cleanup;
	b->prof.n_function = b->nfuncs;
	b->prof.function = b->funcp;
	b->prof.n_location = b->nfuncs;
	b->prof.location = b->locp;
	b->prof.n_string_table = b->st.n;
	b->prof.string_table = b->st.strs;

	len = perftools__profiles__profile__get_packed_size(&b->prof);
	buf = malloc(len ? len : 1);
	if (!buf) {
		err = -ENOMEM;
		goto cleanup;
	}
	perftools__profiles__profile__pack(&b->prof, buf);
	err = pprof__write_gzip(f, buf, len);
	if (!err && fflush(f))
		err = -errno ?: -EIO;
cleanup:
	free(buf);
	pprof__free(b);
	free(b);
	return err < 0 ? err : 0;
}
