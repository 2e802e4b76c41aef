// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* critpath diff: which steps of the average critical path changed, between
 * engine results or saved `report --format json` profiles. Steps match by
 * frames + category; per-request times are rounded as the JSON writer does, so
 * saved and live compare equal. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "msg.h"
#include "report_cmd.h"

#define STR_(x) #x
#define STR(x) STR_(x)

bool diff__is_saved_profile(const char *head, size_t len)
{
	size_t i = 0;
	static const char key[] = "\"critpath_report\"";

	while (i < len && strchr(" \t\r\n", head[i]))
		i++;
	if (i >= len || head[i] != '{')
		return false;
	i++;
	while (i < len && strchr(" \t\r\n", head[i]))
		i++;
	return len - i >= sizeof(key) - 1 && !memcmp(head + i, key, sizeof(key) - 1);
}

static uint64_t per_request(uint64_t total, uint64_t n)
{
	return n ? (total + n / 2) / n : 0;
}

void diff_side__free(struct diff_side *s)
{
	for (uint32_t i = 0; i < s->nsteps; i++) {
		for (uint32_t k = 0; k < s->steps[i].nframes; k++)
			free(s->steps[i].frames[k]);
		free(s->steps[i].frames);
		free(s->steps[i].category);
		free(s->steps[i].samples);
	}
	free(s->steps);
	free(s->label);
	memset(s, 0, sizeof(*s));
}

static int step__set(struct diff_step *d, const char *const *frames, uint32_t n,
		     const char *category, uint64_t per_req, double sd)
{
	d->sd_ns = sd;
	d->nsamples = UINT32_MAX; /* none */
	d->frames = calloc(n ? n : 1, sizeof(char *));
	d->category = strdup(category);
	if (!d->frames || !d->category)
		return -ENOMEM;
	for (uint32_t k = 0; k < n; k++) {
		d->frames[k] = strdup(frames[k] ? frames[k] : "?");
		if (!d->frames[k])
			return -ENOMEM;
		d->nframes = k + 1;
	}
	d->per_request_ns = per_req;
	return 0;
}

int diff_side__from_result(struct diff_side *s, const char *label, const struct engine_result *r)
{
	int err = 0;

	memset(s, 0, sizeof(*s));
	s->label = strdup(label);
	s->steps = calloc(r->nprofile + 1, sizeof(*s->steps));
	if (!s->label || !s->steps) {
		diff_side__free(s);
		return -ENOMEM;
	}
	s->nrequests = r->nrequests;
	s->mean_latency_ns = per_request(r->total_latency_ns, r->nrequests);
	for (uint32_t i = 0; i < r->nprofile && !err; i++) {
		const struct engine_profile_entry *p = &r->profile[i];

		s->nsteps = i + 1;
		err = step__set(&s->steps[i], p->frames, p->nframes, cp_category_name(p->category),
				per_request(p->total_ns, r->nrequests), p->sd_ns);
		if (!err && p->samples_ns) {
			struct diff_step *d = &s->steps[i];

			d->samples = malloc((p->requests + 1) * sizeof(*d->samples));
			if (!d->samples)
				err = -ENOMEM;
			else
				memcpy(d->samples, p->samples_ns, p->requests * sizeof(*d->samples));
			d->nsamples = p->requests;
		}
		s->has_samples = (!i || s->has_samples) && s->steps[i].samples;
	}
	s->has_sd = true;
	if (err)
		diff_side__free(s);
	return err;
}

static uint64_t tree_u64(yajl_val v, const char *key, bool *ok)
{
	const char *path[] = {key, NULL};
	yajl_val n = yajl_tree_get(v, path, yajl_t_number);

	if (!n) {
		*ok = false;
		return 0;
	}
	if (YAJL_IS_INTEGER(n) && YAJL_GET_INTEGER(n) >= 0)
		return (uint64_t)YAJL_GET_INTEGER(n);
	if (YAJL_IS_DOUBLE(n) && YAJL_GET_DOUBLE(n) >= 0)
		return (uint64_t)llround(YAJL_GET_DOUBLE(n));
	*ok = false;
	return 0;
}

/* "samples_ns" (a report of fewer than ENGINE_FEW requests): kept, or
 * none when absent */
static int samples__from_json(struct diff_step *d, yajl_val e, uint32_t i, char *err,
			      size_t errlen)
{
	const char *sp[] = {"samples_ns", NULL};
	yajl_val a = yajl_tree_get(e, sp, yajl_t_any);
	size_t n;

	if (!a)
		return 0;
	if (!YAJL_IS_ARRAY(a) || a->u.array.len >= ENGINE_FEW) {
		snprintf(err, errlen, "profile[%u]: \"samples_ns\" is not an array of fewer than %d "
			 "numbers", i, ENGINE_FEW);
		return -EINVAL;
	}
	n = a->u.array.len;
	d->samples = malloc((n + 1) * sizeof(*d->samples));
	if (!d->samples)
		return -ENOMEM;
	for (size_t k = 0; k < n; k++) {
		yajl_val v = a->u.array.values[k];

		if (!YAJL_IS_INTEGER(v) || YAJL_GET_INTEGER(v) < 0) {
			snprintf(err, errlen,
				 "profile[%u]: samples_ns[%zu] is not a non-negative integer", i, k);
			return -EINVAL;
		}
		d->samples[k] = (uint64_t)YAJL_GET_INTEGER(v);
	}
	d->nsamples = (uint32_t)n;
	return 0;
}

static int step__from_json(struct diff_step *d, yajl_val e, uint32_t i, char *err, size_t errlen)
{
	const char *fp[] = {"frames", NULL}, *cp[] = {"category", NULL};
	yajl_val fr = yajl_tree_get(e, fp, yajl_t_array);
	yajl_val cat = yajl_tree_get(e, cp, yajl_t_string);
	const char **frames = NULL;
	uint64_t per_req, sd;
	uint32_t n;
	bool ok = true, has_sd = true;
	int rc;

	if (!YAJL_IS_OBJECT(e) || !fr || !cat) {
		snprintf(err, errlen,
			 "profile[%u]: expected an object with \"frames\" (array) and "
			 "\"category\" (string)",
			 i);
		return -EINVAL;
	}
	per_req = tree_u64(e, "per_request_ns", &ok);
	if (!ok) {
		snprintf(err, errlen,
			 "profile[%u]: \"per_request_ns\" missing or not a "
			 "non-negative number",
			 i);
		return -EINVAL;
	}
	n = (uint32_t)fr->u.array.len;
	frames = calloc(n ? n : 1, sizeof(*frames));
	if (!frames)
		return -ENOMEM;
	for (uint32_t k = 0; k < n; k++) {
		frames[k] = YAJL_GET_STRING(fr->u.array.values[k]);
		if (!frames[k]) {
			snprintf(err, errlen, "profile[%u]: frames[%u] is not a string", i, k);
			free(frames);
			return -EINVAL;
		}
	}
	sd = tree_u64(e, "sd_ns", &has_sd);
	rc = step__set(d, frames, n, YAJL_GET_STRING(cat), per_req, has_sd ? (double)sd : -1);
	free(frames);
	if (!rc)
		rc = samples__from_json(d, e, i, err, errlen);
	return rc;
}

int diff_side__from_json(struct diff_side *s, const char *label, const char *buf, size_t len,
			 char *err, size_t errlen)
{
	const char *pp[] = {"profile", NULL}, *sp[] = {"summary", NULL};
	char *text = NULL, perr[256] = "";
	yajl_val root = NULL, prof, sum;
	int rc = 0;

	memset(s, 0, sizeof(*s));
	/* yajl_tree_parse wants a NUL-terminated string */
	text = malloc(len + 1);
	if (!text)
		return -ENOMEM;
	memcpy(text, buf, len);
	text[len] = 0;
	root = yajl_tree_parse(text, perr, sizeof(perr));
	free(text);
	if (!root) {
		snprintf(err, errlen, "not valid JSON: %s", perr[0] ? perr : "parse error");
		for (char *c = err; *c; c++)
			if (*c == '\n')
				*c = ' ';
		return -EINVAL;
	}
	prof = yajl_tree_get(root, pp, yajl_t_array);
	if (!prof) {
		snprintf(err, errlen, "no \"profile\" array: not a critpath report");
		rc = -EINVAL;
		goto cleanup;
	}
	s->label = strdup(label);
	s->steps = calloc(prof->u.array.len + 1, sizeof(*s->steps));
	if (!s->label || !s->steps) {
		rc = -ENOMEM;
		goto cleanup;
	}
	sum = yajl_tree_get(root, sp, yajl_t_object);
	if (sum) {
		bool ok = true;

		s->nrequests = tree_u64(sum, "nrequests", &ok);
		s->mean_latency_ns = tree_u64(sum, "mean_latency_ns", &ok);
	}
	s->has_sd = true;
	for (size_t i = 0; i < prof->u.array.len && !rc; i++) {
		s->nsteps = (uint32_t)i + 1;
		rc = step__from_json(&s->steps[i], prof->u.array.values[i], (uint32_t)i, err,
				     errlen);
		s->has_sd &= s->steps[i].sd_ns >= 0;
		s->has_samples = (!i || s->has_samples) && s->steps[i].samples;
	}
cleanup:
	if (rc)
		diff_side__free(s);
	yajl_tree_free(root);
	return rc;
}

static int step_cmp(const struct diff_step *a, const struct diff_step *b)
{
	int c = strcmp(a->category, b->category);

	if (c)
		return c;
	for (uint32_t i = 0; i < a->nframes && i < b->nframes; i++) {
		c = strcmp(a->frames[i], b->frames[i]);
		if (c)
			return c;
	}
	return a->nframes < b->nframes ? -1 : a->nframes > b->nframes ? 1 : 0;
}

static int step_ptr_cmp(const void *pa, const void *pb)
{
	return step_cmp(*(const struct diff_step *const *)pa, *(const struct diff_step *const *)pb);
}

struct change {
	const struct diff_step *step; /* names the step (from A or B) */
	uint64_t a, b;
	double va, vb; /* variances of the step's time per request */
	const struct diff_step *sa, *sb; /* its samples on each side (NULL: none) */
	bool dup;			 /* more than one entry on a side */
	bool has_ci, significant, boot;
	double lo, hi; /* the 95% interval of b - a, ns */
};

static uint64_t change_abs(const struct change *c)
{
	return c->a > c->b ? c->a - c->b : c->b - c->a;
}

/* Significant changes first, then the largest. */
static int change_cmp(const void *pa, const void *pb)
{
	const struct change *a = pa, *b = pb;
	uint64_t da = change_abs(a), db = change_abs(b);

	if (a->significant != b->significant)
		return a->significant ? -1 : 1;
	if (da != db)
		return da > db ? -1 : 1;
	return step_cmp(a->step, b->step);
}

/* The standard normal's quantile (Acklam's rational approximation,
 * relative error below 1.2e-9). */
static double norm_q(double p)
{
	static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
				   -2.759285104469687e+02, 1.383577518672690e+02,
				   -3.066479806614716e+01, 2.506628277459239e+00};
	static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
				   -1.556989798598866e+02, 6.680131188771972e+01,
				   -1.328068155288572e+01};
	static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
				   -2.400758277161838e+00, -2.549732539343734e+00,
				   4.374664141464968e+00,  2.938163982698783e+00};
	static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
				   2.445134137142996e+00, 3.754408661907416e+00};
	double q, r;

	if (p < 0.02425) {
		q = sqrt(-2 * log(p));
		return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
		       ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
	}
	if (p > 1 - 0.02425)
		return -norm_q(1 - p);
	q = p - 0.5;
	r = q * q;
	return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
	       (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

/* Student's t quantile (Cornish-Fisher around the normal; df under 3 taken as
 * 3). */
static double t_q(double p, double df)
{
	double z = norm_q(p), z2 = z * z;

	if (df < 3)
		df = 3;
	return z + z * (z2 + 1) / (4 * df) + z * ((5 * z2 + 16) * z2 + 3) / (96 * df * df) +
	       z * (((3 * z2 + 19) * z2 + 17) * z2 - 15) / (384 * df * df * df);
}

/* Welch's interval for the change of a step's mean per request, Bonferroni over
 * the k steps at 95%; significant when it leaves out 0. */
static void change_ci(struct change *c, uint64_t na, uint64_t nb, uint32_t k)
{
	double sa, sb, se, df, t;

	if (na < 2 || nb < 2)
		return;
	sa = c->va / (double)na;
	sb = c->vb / (double)nb;
	se = sqrt(sa + sb);
	df = sa * sa / (double)(na - 1) + sb * sb / (double)(nb - 1);
	df = df > 0 ? (sa + sb) * (sa + sb) / df : 1e9;
	t = t_q(1 - 0.025 / (k ? k : 1), df);
	c->has_ci = true;
	c->lo = (double)c->b - (double)c->a - t * se;
	c->hi = (double)c->b - (double)c->a + t * se;
	c->significant = c->lo > 0 || c->hi < 0;
}

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The mean of n draws, with replacement, from the m values of v and n - m
 * zeros (the requests without the step). */
static double resampled_mean(const struct diff_step *v, uint64_t n, uint64_t *rs)
{
	uint32_t m = v ? v->nsamples : 0;
	double sum = 0;

	for (uint64_t i = 0; i < n; i++) {
		uint64_t j = splitmix(rs) % n;

		if (j < m)
			sum += (double)v->samples[j];
	}
	return sum / (double)n;
}

static int dbl_cmp(const void *pa, const void *pb)
{
	double a = *(const double *)pa, b = *(const double *)pb;

	return a < b ? -1 : a > b;
}

/* Under ENGINE_FEW requests a side: a percentile bootstrap with a fixed seed,
 * at change_ci's level. */
static void change_boot(struct change *c, uint64_t na, uint64_t nb, uint32_t k)
{
	double tail = 0.025 / (k ? k : 1), *d;
	uint32_t r = (uint32_t)fmin(50000, fmax(2000, ceil(20 / tail)));
	uint64_t rs = 0x243f6a8885a308d3ull ^ (c->a * 0x100000001b3ull) ^ c->b;

	if (na < 2 || nb < 2 || !(d = malloc(r * sizeof(*d))))
		return;
	for (uint32_t i = 0; i < r; i++)
		d[i] = resampled_mean(c->sb, nb, &rs) - resampled_mean(c->sa, na, &rs);
	qsort(d, r, sizeof(*d), dbl_cmp);
	c->has_ci = c->boot = true;
	c->lo = d[(size_t)floor(tail * (r - 1))];
	c->hi = d[(size_t)ceil((1 - tail) * (r - 1))];
	c->significant = c->lo > 0 || c->hi < 0;
	free(d);
}

static const struct diff_step **sorted(const struct diff_side *s)
{
	const struct diff_step **v = malloc((s->nsteps + 1) * sizeof(*v));

	if (!v)
		return NULL;
	for (uint32_t i = 0; i < s->nsteps; i++)
		v[i] = &s->steps[i];
	qsort(v, s->nsteps, sizeof(*v), step_ptr_cmp);
	return v;
}

/* Merges the two sorted step lists into changes. Duplicate steps in a side
 * (a hand-edited file) are summed. */
static int changes__build(const struct diff_side *a, const struct diff_side *b, uint64_t min_change,
			  struct change **out, uint32_t *nout)
{
	const struct diff_step **va = sorted(a), **vb = sorted(b);
	struct change *c = calloc(a->nsteps + b->nsteps + 1, sizeof(*c));
	uint32_t i = 0, j = 0, n = 0, nk = 0;

	if (!va || !vb || !c) {
		free(va);
		free(vb);
		free(c);
		return -ENOMEM;
	}
	while (i < a->nsteps || j < b->nsteps) {
		int cmp = i >= a->nsteps ? 1 : j >= b->nsteps ? -1 : step_cmp(va[i], vb[j]);
		struct change ch = {.step = cmp <= 0 ? va[i] : vb[j]};

		for (; i < a->nsteps && !step_cmp(va[i], ch.step); i++) {
			ch.a += va[i]->per_request_ns;
			ch.va += va[i]->sd_ns * va[i]->sd_ns;
			ch.dup |= ch.sa != NULL;
			ch.sa = va[i];
		}
		for (; j < b->nsteps && !step_cmp(vb[j], ch.step); j++) {
			ch.b += vb[j]->per_request_ns;
			ch.vb += vb[j]->sd_ns * vb[j]->sd_ns;
			ch.dup |= ch.sb != NULL;
			ch.sb = vb[j];
		}
		if (ch.a != ch.b && change_abs(&ch) >= min_change)
			c[n++] = ch;
		nk++;
	}
	for (uint32_t k = 0; k < n; k++) {
		if (a->has_samples && b->has_samples && !c[k].dup)
			change_boot(&c[k], a->nrequests, b->nrequests, nk);
		else if (a->has_sd && b->has_sd)
			change_ci(&c[k], a->nrequests, b->nrequests, nk);
	}
	free(va);
	free(vb);
	qsort(c, n, sizeof(*c), change_cmp); /* significant first */
	*out = c;
	*nout = n;
	return 0;
}

/* The side ran past --max-paths: its steps ending in ENGINE_OTHER hold
 * whatever paths came after the cap there, not the same ones as the other
 * side's. */
static bool folded(const struct diff_side *s)
{
	for (uint32_t i = 0; i < s->nsteps; i++)
		if (s->steps[i].nframes &&
		    !strcmp(s->steps[i].frames[s->steps[i].nframes - 1], ENGINE_OTHER))
			return true;
	return false;
}

static void put_step(FILE *f, const struct diff_step *s)
{
	for (uint32_t i = 0; i < s->nframes; i++)
		fprintf(f, "%s ; ", text__safe(s->frames[i]));
	fputs(text__safe(s->category), f);
}

static void write_text(FILE *f, const struct diff_side *a, const struct diff_side *b,
		       const struct change *c, uint32_t n, uint32_t top)
{
	bool fa = folded(a), fb = folded(b);

	fprintf(f, "A: %s: %llu requests, mean latency %.3f ms\n", text__safe(a->label),
		(unsigned long long)a->nrequests, a->mean_latency_ns / 1e6);
	fprintf(f, "B: %s: %llu requests, mean latency %.3f ms\n", text__safe(b->label),
		(unsigned long long)b->nrequests, b->mean_latency_ns / 1e6);
	if (fa || fb)
		fprintf(f,
			"note: %s had more distinct call paths than --max-paths: a step ending "
			"in \"" ENGINE_OTHER "\" holds different paths on each side\n",
			fa && fb ? "A and B" : fa ? "A" : "B");
	if (!n) {
		fprintf(f, "no differences\n");
		return;
	}
	fprintf(f,
		"\nSteps whose critical-path time per request changed most (top %u of %u); * = "
		"significant\n(its interval leaves out 0: %s, the steps' together at 95%%), "
		"first\n",
		n < top ? n : top, n,
		a->has_samples && b->has_samples
		    ? "a bootstrap's, fewer than " STR(ENGINE_FEW) " requests a side"
		    : "Welch's");
	fprintf(f, "%10s %10s %11s %23s %8s  %s\n", "A ms/req", "B ms/req", "change ms",
		"interval ms", "ratio", "step");
	for (uint32_t i = 0; i < n && i < top; i++) {
		double d = ((double)c[i].b - (double)c[i].a) / 1e6;
		char ci[32] = "-";

		if (c[i].has_ci)
			snprintf(ci, sizeof(ci), "[%+.3f, %+.3f]%s", c[i].lo / 1e6, c[i].hi / 1e6,
				 c[i].significant ? " *" : "  ");
		fprintf(f, "%10.3f %10.3f %+11.3f %23s ", c[i].a / 1e6, c[i].b / 1e6, d, ci);
		if (c[i].a && c[i].b)
			fprintf(f, "%7.2fx  ", (double)c[i].b / (double)c[i].a);
		else
			fprintf(f, "%8s  ", c[i].a ? "gone" : "new");
		put_step(f, c[i].step);
		fputc('\n', f);
	}
	if (!a->has_sd || !b->has_sd)
		fprintf(f, "(no intervals: a saved report from before critpath wrote \"sd_ns\")\n");
}

static void gk(yajl_gen g, const char *k)
{
	yajl_gen_string(g, (const unsigned char *)k, strlen(k));
}

static void gs(yajl_gen g, const char *s)
{
	yajl_gen_string(g, (const unsigned char *)s, strlen(s));
}

static void gu(yajl_gen g, const char *k, uint64_t v)
{
	char buf[24];
	int len = snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);

	gk(g, k);
	yajl_gen_number(g, buf, len);
}

static void write_side(yajl_gen g, const char *k, const struct diff_side *s)
{
	gk(g, k);
	yajl_gen_map_open(g);
	gk(g, "source");
	gs(g, s->label);
	gu(g, "nrequests", s->nrequests);
	gu(g, "mean_latency_ns", s->mean_latency_ns);
	gk(g, "folded_paths"); /* past --max-paths: see write_text */
	yajl_gen_bool(g, folded(s));
	yajl_gen_map_close(g);
}

static void write_out(void *ctx, const char *s, size_t len)
{
	fwrite(s, 1, len, ctx);
}

static void write_json(FILE *f, const struct diff_side *a, const struct diff_side *b,
		       const struct change *c, uint32_t n, uint32_t top)
{
	yajl_gen g = yajl_gen_alloc(NULL);

	if (!g)
		return;
	yajl_gen_config(g, yajl_gen_print_callback, write_out, f);
	yajl_gen_map_open(g);
	gk(g, "critpath_diff");
	yajl_gen_integer(g, 1);
	write_side(g, "a", a);
	write_side(g, "b", b);
	gk(g, "changes");
	yajl_gen_array_open(g);
	for (uint32_t i = 0; i < n && i < top; i++) {
		yajl_gen_map_open(g);
		gk(g, "frames");
		yajl_gen_array_open(g);
		for (uint32_t k = 0; k < c[i].step->nframes; k++)
			gs(g, c[i].step->frames[k]);
		yajl_gen_array_close(g);
		gk(g, "category");
		gs(g, c[i].step->category);
		gu(g, "a_per_request_ns", c[i].a);
		gu(g, "b_per_request_ns", c[i].b);
		gk(g, "change_ns");
		yajl_gen_integer(g, (long long)c[i].b - (long long)c[i].a);
		if (c[i].a) {
			gk(g, "ratio");
			yajl_gen_double(g, (double)c[i].b / (double)c[i].a);
		}
		if (c[i].has_ci) {
			gk(g, "ci_low_ns");
			yajl_gen_integer(g, (long long)llround(c[i].lo));
			gk(g, "ci_high_ns");
			yajl_gen_integer(g, (long long)llround(c[i].hi));
			gk(g, "significant");
			yajl_gen_bool(g, c[i].significant);
			gk(g, "interval");
			gs(g, c[i].boot ? "bootstrap" : "welch");
		}
		yajl_gen_map_close(g);
	}
	yajl_gen_array_close(g);
	yajl_gen_map_close(g);
	yajl_gen_free(g);
	fputc('\n', f);
}

int diff__write(FILE *f, const struct diff_side *a, const struct diff_side *b,
		const struct diff_opts *o)
{
	uint32_t top = o && o->top ? o->top : 20, n = 0;
	struct change *c = NULL;
	int err;

	err = changes__build(a, b, o ? o->min_change_ns : 0, &c, &n);
	if (err)
		return err;
	if (o && o->json)
		write_json(f, a, b, c, n, top);
	else
		write_text(f, a, b, c, n, top);
	free(c);
	if (fflush(f) || ferror(f))
		return -EIO;
	return (int)n;
}
