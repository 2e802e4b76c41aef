// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* span.h on top of the engine: the parser and walk (span/parse.c,
 * span/tree.c, span/walk.c) hand requests and warnings to a sink; here the
 * sink is the engine. */
#include "engine.h"
#include "span.h"
#include "span_internal.h"

static int to_engine(void *ctx, const struct cp_request *r)
{
	engine__add_request(ctx, r); /* 0 = filtered out, which is not an error */
	return 0;
}

static void warn_engine(void *ctx, const char *msg)
{
	engine__warn(ctx, "%s", msg);
}

static const char *intern_engine(void *ctx, const char *s)
{
	return engine__intern(ctx, s);
}

int span__analyze_file(const char *path, struct engine *e, const struct span_opts *o)
{
	struct span_sink sink = {to_engine, warn_engine, e, intern_engine};

	return span_input__analyze_file(path, &sink, o);
}

int span__analyze_buffer(const char *name, const char *buf, size_t len, struct engine *e,
			 const struct span_opts *o)
{
	struct span_sink sink = {to_engine, warn_engine, e, intern_engine};

	return span_input__analyze_buffer(name, buf, len, &sink, o);
}

struct span_input *span__input_new(struct engine *e, const struct span_opts *o)
{
	struct span_sink sink = {to_engine, warn_engine, e, intern_engine};

	return span_input__new(&sink, o);
}

int span__input_file(struct span_input *in, const char *path)
{
	return span_input__file(in, path);
}

int span__input_end(struct span_input *in)
{
	return span_input__end(in);
}

void span__input_free(struct span_input *in)
{
	span_input__free(in);
}
