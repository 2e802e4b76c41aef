// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* util.h's growing arrays, string hash, u64map, interning and durations. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

int grow_array(void **arr, uint32_t *cap, uint32_t need, size_t elem, uint32_t first)
{
	uint32_t n = *cap ? *cap : first;
	void *p;

	if (need <= *cap)
		return 0;
	if (need > UINT32_MAX / 2)
		return -ENOMEM;
	while (n < need)
		n *= 2;
	p = realloc(*arr, (size_t)n * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = n;
	return 0;
}

uint64_t clock__mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t hash__cstr(const char *s)
{
	size_t len = s ? strlen(s) : 0;
	uint64_t h = 0x9e3779b97f4a7c15ull ^ len, w;

	for (; len >= 8; s += 8, len -= 8) {
		memcpy(&w, s, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	w = 0;
	if (len)
		memcpy(&w, s, len);
	h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
	return h ^ (h >> 29);
}

uint64_t hash__str(uint64_t h, const char *s)
{
	return hash__u64(h, s ? hash__cstr(s) : 0x5bd1e995);
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static int u64map__rehash(struct u64map *m, uint32_t cap)
{
	uint64_t *keys = calloc(cap, sizeof(*keys));
	uint32_t *vals = malloc((size_t)cap * sizeof(*vals));

	if (!keys || !vals) {
		free(keys);
		free(vals);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < cap; i++)
		vals[i] = U64MAP_NONE;
	for (uint32_t i = 0; i < m->cap; i++) {
		uint32_t h;

		if (m->vals[i] == U64MAP_NONE)
			continue;
		h = (uint32_t)mix64(m->keys[i]) & (cap - 1);
		while (vals[h] != U64MAP_NONE)
			h = (h + 1) & (cap - 1);
		keys[h] = m->keys[i];
		vals[h] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	m->keys = keys;
	m->vals = vals;
	m->cap = cap;
	return 0;
}

int u64map__put(struct u64map *m, uint64_t key, uint32_t val)
{
	uint32_t h;

	if ((m->n + 1) * 2 > m->cap && u64map__rehash(m, m->cap ? m->cap * 2 : 64))
		return -ENOMEM;
	h = (uint32_t)mix64(key) & (m->cap - 1);
	while (m->vals[h] != U64MAP_NONE && m->keys[h] != key)
		h = (h + 1) & (m->cap - 1);
	if (m->vals[h] == U64MAP_NONE)
		m->n++;
	m->keys[h] = key;
	m->vals[h] = val;
	return 0;
}

uint32_t u64map__get(const struct u64map *m, uint64_t key)
{
	uint32_t h;

	if (!m->cap)
		return U64MAP_NONE;
	h = (uint32_t)mix64(key) & (m->cap - 1);
	while (m->vals[h] != U64MAP_NONE) {
		if (m->keys[h] == key)
			return m->vals[h];
		h = (h + 1) & (m->cap - 1);
	}
	return U64MAP_NONE;
}

void u64map__del(struct u64map *m, uint64_t key)
{
	uint32_t h, j, mask = m->cap - 1;

	if (!m->cap)
		return;
	h = (uint32_t)mix64(key) & mask;
	while (m->vals[h] != U64MAP_NONE && m->keys[h] != key)
		h = (h + 1) & mask;
	if (m->vals[h] == U64MAP_NONE)
		return;
	m->vals[h] = U64MAP_NONE;
	m->n--;
	for (j = (h + 1) & mask; m->vals[j] != U64MAP_NONE; j = (j + 1) & mask) {
		uint32_t home = (uint32_t)mix64(m->keys[j]) & mask;

		/* stays when home lies cyclically in (h, j] */
		if (h <= j ? (home > h && home <= j) : (home > h || home <= j))
			continue;
		m->keys[h] = m->keys[j];
		m->vals[h] = m->vals[j];
		m->vals[j] = U64MAP_NONE;
		h = j;
	}
}

void u64map__free(struct u64map *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}

/* Interning: open addressing over pointers into arena chunks, each with its
 * hash: a probe compares hashes, and a string is read (a cache miss, with
 * many strings) only when they match. */
struct intern_slot {
	const char *s;
	uint64_t h;
};

struct intern {
	struct intern_slot *slots;
	uint32_t cap, n;
	char *chunk;
	size_t chunk_left;
	char **chunks;
	uint32_t nchunks;
};

#define INTERN_CHUNK 65536

struct intern *intern__new(void)
{
	struct intern *in = calloc(1, sizeof(*in));

	if (!in)
		return NULL;
	in->cap = 1024;
	in->slots = calloc(in->cap, sizeof(*in->slots));
	if (!in->slots) {
		free(in);
		return NULL;
	}
	return in;
}

void intern__free(struct intern *in)
{
	if (!in)
		return;
	for (uint32_t i = 0; i < in->nchunks; i++)
		free(in->chunks[i]);
	free(in->chunks);
	free(in->slots);
	free(in);
}

static char *intern__store(struct intern *in, const char *s, size_t len)
{
	char *p, **chunks;

	if (len + 1 > in->chunk_left) {
		size_t sz = len + 1 > INTERN_CHUNK ? len + 1 : INTERN_CHUNK;

		chunks = realloc(in->chunks, (in->nchunks + 1) * sizeof(*chunks));
		if (!chunks)
			return NULL;
		in->chunks = chunks;
		p = malloc(sz);
		if (!p)
			return NULL;
		in->chunks[in->nchunks++] = p;
		in->chunk = p;
		in->chunk_left = sz;
	}
	p = in->chunk;
	memcpy(p, s, len + 1);
	in->chunk += len + 1;
	in->chunk_left -= len + 1;
	return p;
}

static int intern__grow(struct intern *in)
{
	uint32_t cap = in->cap * 2;
	struct intern_slot *slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (uint32_t i = 0; i < in->cap; i++) {
		uint32_t j;

		if (!in->slots[i].s)
			continue;
		j = (uint32_t)in->slots[i].h & (cap - 1);
		while (slots[j].s)
			j = (j + 1) & (cap - 1);
		slots[j] = in->slots[i];
	}
	free(in->slots);
	in->slots = slots;
	in->cap = cap;
	return 0;
}

const char *intern__get(struct intern *in, const char *s)
{
	uint64_t h;
	uint32_t j;
	char *p;

	if (!s)
		return NULL;
	if ((in->n + 1) * 4 > in->cap * 3 && intern__grow(in))
		return NULL;
	h = hash__str(0, s);
	j = (uint32_t)h & (in->cap - 1);
	while (in->slots[j].s) {
		if (in->slots[j].h == h && !strcmp(in->slots[j].s, s))
			return in->slots[j].s;
		j = (j + 1) & (in->cap - 1);
	}
	p = intern__store(in, s, strlen(s));
	if (!p)
		return NULL;
	in->slots[j] = (struct intern_slot){p, h};
	in->n++;
	return p;
}

static const struct {
	const char *unit;
	double ns;
} units[] = {
    {"ns", 1},	{"us", 1e3}, {"\xc2\xb5s", 1e3}, {"ms", 1e6},
    {"s", 1e9}, {"m", 60e9}, {"min", 60e9},	 {"h", 3600e9},
};

int parse_duration(const char *s, uint64_t *ns)
{
	char *end;
	double v;

	if (!s || !*s || isspace((unsigned char)*s) || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v < 0)
		return -EINVAL;
	if (!*end) {
		/* a bare number is only unambiguous when it is zero */
		if (v != 0)
			return -EINVAL;
		*ns = 0;
		return 0;
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].unit))
			continue;
		v *= units[i].ns;
		if (v >= 1.8e19)
			return -EINVAL;
		*ns = (uint64_t)llround(v);
		return 0;
	}
	return -EINVAL;
}

size_t utf8__seq(const unsigned char *s, size_t left)
{
	size_t n;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (n > left)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return n;
}

bool utf8__valid(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;

	for (size_t i = 0, k; i < n; i += k) {
		if (u[i] < 0x80) {
			k = 1;
			continue;
		}
		if (!(k = utf8__seq(u + i, n - i)))
			return false;
	}
	return true;
}

size_t utf8__repair(const char *s, size_t n, char *out)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t o = 0;

	for (size_t i = 0, k; i < n; i += k) {
		k = utf8__seq(u + i, n - i);
		if (k) {
			memcpy(out + o, u + i, k);
			o += k;
		} else {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			k = 1;
		}
	}
	return o;
}
