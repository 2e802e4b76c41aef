// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * pprof output: gunzip and decode it back with protobuf-c and check every
 * sample, then have Debian's `go tool pprof -top` read it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <zlib.h>

#include "out_fixture.h"
#include "profile.pb-c.h"

struct pprof_state {
	char *dir;
	char path[256];
};

static int setup(void **state)
{
	struct pprof_state *s = calloc(1, sizeof(*s));
	FILE *f;

	if (!s)
		return -1;
	s->dir = fx_tmpdir();
	if (!s->dir)
		return -1;
	snprintf(s->path, sizeof(s->path), "%s/profile.pb.gz", s->dir);
	f = fopen(s->path, "w");
	if (!f)
		return -1;
	if (out_pprof(f, &fx_result, &(struct out_opts){.title = "fixture"})) {
		fclose(f);
		return -1;
	}
	fclose(f);
	*state = s;
	return 0;
}

static int teardown(void **state)
{
	struct pprof_state *s = *state;

	fx_rmtree(s->dir);
	free(s->dir);
	free(s);
	return 0;
}

static uint8_t *gunzip_file(const char *path, size_t *len)
{
	size_t cap = 1 << 16;
	uint8_t *buf = malloc(cap);
	gzFile gz = gzopen(path, "rb");
	int n;

	*len = 0;
	if (!gz || !buf) {
		free(buf);
		if (gz)
			gzclose(gz);
		return NULL;
	}
	while ((n = gzread(gz, buf + *len, cap - *len)) > 0) {
		*len += n;
		if (*len == cap) {
			uint8_t *b = realloc(buf, cap * 2);

			if (!b)
				break;
			buf = b;
			cap *= 2;
		}
	}
	gzclose(gz);
	return buf;
}

static const char *func_name(const Perftools__Profiles__Profile *p, uint64_t loc_id)
{
	for (size_t i = 0; i < p->n_location; i++) {
		if (p->location[i]->id != loc_id)
			continue;
		assert_int_equal(p->location[i]->n_line, 1);
		for (size_t j = 0; j < p->n_function; j++)
			if (p->function[j]->id == p->location[i]->line[0]->function_id)
				return p->string_table[p->function[j]->name];
	}
	fail_msg("location %llu has no function", (unsigned long long)loc_id);
	return NULL;
}

static void test_pprof_decodes(void **state)
{
	struct pprof_state *s = *state;
	Perftools__Profiles__Profile *p;
	unsigned char magic[2];
	size_t len;
	uint8_t *buf;
	FILE *f;

	/* a real gzip member: magic 1f 8b */
	f = fopen(s->path, "rb");
	assert_non_null(f);
	assert_int_equal(fread(magic, 1, 2, f), 2);
	fclose(f);
	assert_int_equal(magic[0], 0x1f);
	assert_int_equal(magic[1], 0x8b);

	buf = gunzip_file(s->path, &len);
	assert_non_null(buf);
	p = perftools__profiles__profile__unpack(NULL, len, buf);
	assert_non_null(p);
	assert_true(p->n_string_table > 1);
	assert_string_equal(p->string_table[0], "");
	assert_int_equal(p->n_sample_type, 3);
	assert_string_equal(p->string_table[p->sample_type[0]->type], "critical_path");
	assert_string_equal(p->string_table[p->sample_type[0]->unit], "nanoseconds");
	assert_string_equal(p->string_table[p->sample_type[1]->type], "requests");
	assert_string_equal(p->string_table[p->sample_type[2]->type], "per_request");
	assert_string_equal(p->string_table[p->default_sample_type], "critical_path");
	assert_int_equal(p->n_sample, fx_result.nprofile);

	for (size_t i = 0; i < p->n_sample; i++) {
		const struct engine_profile_entry *pe = &fx_result.profile[i];
		const Perftools__Profiles__Sample *sm = p->sample[i];

		/* leaf first: the category, then the frames from the deepest up */
		assert_int_equal(sm->n_location_id, pe->nframes + 1);
		assert_string_equal(func_name(p, sm->location_id[0]),
				    cp_category_name(pe->category));
		for (uint32_t j = 0; j < pe->nframes; j++)
			assert_string_equal(func_name(p, sm->location_id[pe->nframes - j]),
					    pe->frames[j]);
		assert_int_equal(sm->n_value, 3);
		assert_int_equal(sm->value[0], pe->total_ns);
		assert_int_equal(sm->value[1], pe->requests);
		assert_int_equal(sm->value[2], pe->total_ns / fx_result.nrequests);
		assert_int_equal(sm->n_label, 1);
		assert_string_equal(p->string_table[sm->label[0]->key], "category");
		assert_string_equal(p->string_table[sm->label[0]->str],
				    cp_category_name(pe->category));
	}
	/* equal names share one function: "web" exists once */
	{
		int nweb = 0;

		for (size_t j = 0; j < p->n_function; j++)
			nweb += !strcmp(p->string_table[p->function[j]->name], "web");
		assert_int_equal(nweb, 1);
	}
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(buf);
}

static void test_pprof_empty_result(void **state)
{
	struct engine_result empty = {0};
	Perftools__Profiles__Profile *p;
	char *buf = NULL;
	size_t blen = 0, len;
	uint8_t *raw;
	FILE *f = open_memstream(&buf, &blen);
	char path[300];

	assert_non_null(f);
	assert_int_equal(out_pprof(f, &empty, &(struct out_opts){0}), 0);
	fclose(f);
	assert_true(blen > 18);
	snprintf(path, sizeof(path), "%s/empty.pb.gz", ((struct pprof_state *)*state)->dir);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(buf, 1, blen, f), blen);
	fclose(f);
	raw = gunzip_file(path, &len);
	assert_non_null(raw);
	p = perftools__profiles__profile__unpack(NULL, len, raw);
	assert_non_null(p);
	assert_int_equal(p->n_sample, 0);
	assert_string_equal(p->string_table[0], "");
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(raw);
	free(buf);
}

/* Span input: the deepest span is the leaf, no "span" frame below it. */
static void test_pprof_span_leaf(void **state)
{
	static const char *const fr[] = {"frontend GET /", "backend query"};
	struct engine_profile_entry pe = {fr, 2, CP_CAT_SPAN, 4 * MS, 1};
	struct engine_result r = {.nrequests = 1, .profile = &pe, .nprofile = 1};
	Perftools__Profiles__Profile *p;
	char path[300];
	uint8_t *raw;
	size_t len;
	FILE *f;

	snprintf(path, sizeof(path), "%s/span.pb.gz", ((struct pprof_state *)*state)->dir);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(out_pprof(f, &r, NULL), 0);
	fclose(f);
	raw = gunzip_file(path, &len);
	assert_non_null(raw);
	p = perftools__profiles__profile__unpack(NULL, len, raw);
	assert_non_null(p);
	assert_int_equal(p->n_sample, 1);
	assert_int_equal(p->sample[0]->n_location_id, 2);
	assert_string_equal(func_name(p, p->sample[0]->location_id[0]), "backend query");
	assert_string_equal(func_name(p, p->sample[0]->location_id[1]), "frontend GET /");
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(raw);
}

/* Debian's golang-go ships pprof: the real consumer must read the file. */
static void test_pprof_go_tool_reads(void **state)
{
	struct pprof_state *s = *state;
	char cmd[1024];
	char *out;
	int st;

	if (!fx_have("go")) {
		print_message("go not installed (Debian golang-go): go tool pprof check skipped\n");
		skip();
	}
	snprintf(cmd, sizeof(cmd),
		 "cd '%1$s' && HOME='%1$s' GOCACHE='%1$s/gocache' PPROF_TMPDIR='%1$s' "
		 "GOFLAGS= GOTOOLCHAIN=local go tool pprof -top -nodecount=50 '%2$s' 2>&1",
		 s->dir, s->path);
	out = fx_run(cmd, &st);
	assert_non_null(out);
	if (st != 0)
		fail_msg("go tool pprof failed (%d): %s", st, out);
	/* 100 ms of critical path in all; flat time per leaf category */
	if (!strstr(out, "of 100ms total"))
		fail_msg("total missing in:\n%s", out);
	assert_non_null(strstr(out, "network"));
	assert_non_null(strstr(out, "cpu"));
	assert_non_null(strstr(out, "lock"));
	assert_non_null(strstr(out, "runqueue"));
	assert_non_null(strstr(out, "kvstore"));
	/* cpu is flat 35 ms: 30 in GET /api and 5 in the nasty step */
	assert_non_null(strstr(out, "35ms"));
	free(out);

	/* the average critical path view: 10 ms per request */
	snprintf(cmd, sizeof(cmd),
		 "cd '%1$s' && HOME='%1$s' GOCACHE='%1$s/gocache' PPROF_TMPDIR='%1$s' "
		 "GOTOOLCHAIN=local go tool pprof -top -sample_index=per_request '%2$s' 2>&1",
		 s->dir, s->path);
	out = fx_run(cmd, &st);
	assert_non_null(out);
	if (st != 0 || (!strstr(out, "of 10ms total") && !strstr(out, "of 10000us total")))
		fail_msg("per_request view wrong (%d):\n%s", st, out);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pprof_decodes),
	    cmocka_unit_test(test_pprof_empty_result),
	    cmocka_unit_test(test_pprof_span_leaf),
	    cmocka_unit_test(test_pprof_go_tool_reads),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
