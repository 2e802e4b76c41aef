// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * span_json.h on simdjson's On-Demand API: the only C++ in critpath, the
 * layout of Jaeger, OTLP and Zipkin v2 JSON and nothing else. Each value handed on is
 * checked first (strings unescaped, numbers against JSON's grammar, atoms
 * spelled out); a value under a key not listed here is skipped by simdjson,
 * which checks only its brackets. A container where a scalar is expected, or
 * the other way round, is skipped too (the yajl reader did the same). No
 * exception leaves this file: simdjson is used through error codes.
 */
#include <cerrno>
#include <new>
#include <simdjson.h>

#include "span_json.h"

using namespace simdjson;
using std::string_view;
using jtype = ondemand::json_type;

static_assert(SPAN_JSON_PADDING == SIMDJSON_PADDING, "span_json.h's padding is simdjson's");

struct span_json {
	ondemand::parser parser;
};

/* JSON's number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
extern "C" bool span_json__number_ok(const char *s, size_t n)
{
	size_t i = 0, d;

	if (i < n && s[i] == '-')
		i++;
	if (i < n && s[i] == '0') {
		i++;
	} else {
		for (d = i; i < n && s[i] >= '0' && s[i] <= '9'; i++)
			;
		if (i == d)
			return false;
	}
	if (i < n && s[i] == '.') {
		for (d = ++i; i < n && s[i] >= '0' && s[i] <= '9'; i++)
			;
		if (i == d)
			return false;
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		if (++i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		for (d = i; i < n && s[i] >= '0' && s[i] <= '9'; i++)
			;
		if (i == d)
			return false;
	}
	return i == n;
}

namespace
{

/* Walk functions return 0, 1 for malformed JSON (r.err says why), or a
 * handler's < 0. */
struct reader {
	void *ctx;
	const char *last_key; /* where the last key read starts, for warnings */
	error_code err;
};

#define TRY(x)                                                                                     \
	do {                                                                                       \
		if ((r.err = (x)))                                                                 \
			return 1;                                                                  \
	} while (0)

/* A string's bytes as they stand in the input (s: after its opening quote;
 * stage 1 has checked that it closes and holds no control characters):
 * false when it has escapes to undo (simdjson's unescaping is a call away,
 * too slow for every key). */
bool raw_string(const char *s, string_view *out)
{
	const char *e;

	if (!span_json__raw_string(s, NULL, &e))
		return false;
	*out = string_view(s, e - s);
	return true;
}

/* The text of a scalar (have = false: null, or a container left unread).
 * The token's first byte tells its type (simdjson's type() would look at
 * the same byte, at the cost of a second call). */
int text_of(reader &r, ondemand::value &v, string_view &s, bool &have, bool &is_string)
{
	string_view tok = v.raw_json_token(); /* with the white space after it */
	bool b;

	have = false;
	switch (tok.empty() ? 0 : tok[0]) {
	case '"':
		if (!raw_string(tok.data() + 1, &s))
			TRY(v.get_string().get(s));
		is_string = true;
		break;
	case '-':
	case '0' ... '9':
		while (tok.back() == ' ' || tok.back() == '\t' || tok.back() == '\n' ||
		       tok.back() == '\r')
			tok.remove_suffix(1);
		if (!span_json__number_ok(tok.data(), tok.size()))
			TRY(NUMBER_ERROR);
		s = tok;
		is_string = false;
		break;
	case 't':
	case 'f':
		TRY(v.get_bool().get(b));
		s = b ? "true" : "false";
		is_string = false;
		break;
	case 'n':
		TRY(v.is_null().get(b));
		if (!b)
			TRY(N_ATOM_ERROR);
		return 0;
	case '{':
	case '[':
		return 0;
	default:
		TRY(TAPE_ERROR);
	}
	have = true;
	return 0;
}

/* fn(key, value) for every field of o. */
template <typename F> int each_field(reader &r, ondemand::object &o, F fn)
{
	for (auto item : o) {
		string_view k;

		TRY(item.error());
		ondemand::field &f = item.value_unsafe();
		r.last_key = f.key().raw() - 1;
		if (!raw_string(f.key().raw(), &k))
			TRY(f.unescaped_key().get(k));
		CALL(fn(k, f.value()));
	}
	return 0;
}

/* fn(object) when v is an object, nothing when it is anything else. */
template <typename F> int as_object(reader &r, ondemand::value &v, F fn)
{
	ondemand::object o;
	jtype t;

	TRY(v.type().get(t));
	if (t != jtype::object)
		return 0;
	TRY(v.get_object().get(o));
	return fn(o);
}

/* fn(object) for every element of v that is an object, when v is an array. */
template <typename F> int each_object(reader &r, ondemand::value &v, F fn)
{
	ondemand::array a;
	jtype t;

	TRY(v.type().get(t));
	if (t != jtype::array)
		return 0;
	TRY(v.get_array().get(a));
	for (auto item : a) {
		TRY(item.error());
		CALL(as_object(r, item.value_unsafe(), fn));
	}
	return 0;
}

int field(reader &r, ondemand::value &v, span_json_field f)
{
	string_view s;
	bool have, is_string;

	CALL(text_of(r, v, s, have, is_string));
	return have ? span_json__field(r.ctx, f, s.data(), s.size(), is_string) : 0;
}

/* Jaeger {"key": k, "type": t, "value": v}; OTLP {"key": k, "value":
 * {"stringValue": v}} (any scalar "…Value"). Every field is walked to the
 * object's end: a field looked up by name left what follows it unread, and
 * junk there ("v" -1e999}) passed unseen. */
int tag(reader &r, ondemand::object &o, bool otlp, span_json_tags where)
{
	string_view k, val;
	bool has_k = false, has_v = false, is_string;

	CALL(each_field(r, o, [&](string_view f, ondemand::value &v) {
		if (f == "key")
			return text_of(r, v, k, has_k, is_string);
		if (f != "value")
			return 0;
		if (!otlp)
			return text_of(r, v, val, has_v, is_string);
		return as_object(r, v, [&](ondemand::object &any) {
			return each_field(r, any, [&](string_view ik, ondemand::value &iv) {
				if (ik.size() > 5 && ik.substr(ik.size() - 5) == "Value")
					return text_of(r, iv, val, has_v, is_string);
				return 0;
			});
		});
	}));
	if (!has_k || !has_v)
		return 0;
	return span_json__tag(r.ctx, where, k.data(), k.size(), val.data(), val.size());
}

int tags(reader &r, ondemand::value &v, bool otlp, span_json_tags where)
{
	return each_object(r, v, [&](ondemand::object &o) { return tag(r, o, otlp, where); });
}

int jaeger_ref(reader &r, ondemand::object &o)
{
	string_view type, id;
	bool has_type = false, has_id = false, is_string;

	CALL(each_field(r, o, [&](string_view k, ondemand::value &v) {
		if (k == "refType")
			return text_of(r, v, type, has_type, is_string);
		if (k == "spanID")
			return text_of(r, v, id, has_id, is_string);
		return 0;
	}));
	return span_json__ref(r.ctx, has_type ? type.data() : nullptr, type.size(),
			      has_id ? id.data() : nullptr, id.size());
}

int jaeger_span(reader &r, ondemand::object &o)
{
	CALL(span_json__span_begin(r.ctx));
	CALL(each_field(r, o, [&](string_view k, ondemand::value &v) {
		switch (k.size()) {
		case 4:
			if (k == "tags")
				return tags(r, v, false, SPAN_JSON_SPAN_TAG);
			break;
		case 6:
			if (k == "spanID")
				return field(r, v, SPAN_JSON_SPAN_ID);
			break;
		case 7:
			if (k == "traceID")
				return field(r, v, SPAN_JSON_TRACE_ID);
			break;
		case 8:
			if (k == "duration")
				return field(r, v, SPAN_JSON_DURATION);
			break;
		case 9:
			if (k == "startTime")
				return field(r, v, SPAN_JSON_START);
			if (k == "processID")
				return field(r, v, SPAN_JSON_PROCESS_ID);
			break;
		case 10:
			if (k == "references")
				return each_object(r, v, [&](ondemand::object &ref) {
					return jaeger_ref(r, ref);
				});
			break;
		case 12:
			if (k == "parentSpanID")
				return field(r, v, SPAN_JSON_PARENT_ID);
			break;
		case 13:
			if (k == "operationName")
				return field(r, v, SPAN_JSON_OPERATION);
			break;
		}
		return 0;
	}));
	return span_json__span_end(r.ctx);
}

int jaeger_process(reader &r, string_view id, ondemand::object &o)
{
	CALL(span_json__proc_begin(r.ctx, id.data(), id.size()));
	return each_field(r, o, [&](string_view k, ondemand::value &v) {
		string_view s;
		bool have, is_string;

		if (k == "tags")
			return tags(r, v, false, SPAN_JSON_PROC_TAG);
		if (k != "serviceName")
			return 0;
		CALL(text_of(r, v, s, have, is_string));
		return have ? span_json__proc_service(r.ctx, s.data(), s.size()) : 0;
	});
}

int jaeger_trace(reader &r, ondemand::object &o)
{
	CALL(each_field(r, o, [&](string_view k, ondemand::value &v) {
		string_view s;
		bool have, is_string;

		if (k == "spans")
			return each_object(
			    r, v, [&](ondemand::object &sp) { return jaeger_span(r, sp); });
		if (k == "processes")
			return as_object(r, v, [&](ondemand::object &procs) {
				return each_field(
				    r, procs, [&](string_view id, ondemand::value &pv) {
					    return as_object(r, pv, [&](ondemand::object &p) {
						    return jaeger_process(r, id, p);
					    });
				    });
			});
		if (k != "traceID")
			return 0;
		CALL(text_of(r, v, s, have, is_string));
		return have && is_string ? span_json__trace_id(r.ctx, s.data(), s.size()) : 0;
	}));
	return span_json__trace_end(r.ctx);
}

int otlp_span(reader &r, ondemand::object &o)
{
	CALL(span_json__span_begin(r.ctx));
	CALL(each_field(r, o, [&](string_view k, ondemand::value &v) {
		switch (k.size()) {
		case 4:
			if (k == "name")
				return field(r, v, SPAN_JSON_OPERATION);
			if (k == "kind")
				return field(r, v, SPAN_JSON_KIND);
			break;
		case 6:
			if (k == "spanId")
				return field(r, v, SPAN_JSON_SPAN_ID);
			break;
		case 7:
			if (k == "traceId")
				return field(r, v, SPAN_JSON_TRACE_ID);
			break;
		case 10:
			if (k == "attributes")
				return tags(r, v, true, SPAN_JSON_SPAN_TAG);
			break;
		case 12:
			if (k == "parentSpanId")
				return field(r, v, SPAN_JSON_PARENT_ID);
			break;
		case 15:
			if (k == "endTimeUnixNano")
				return field(r, v, SPAN_JSON_END);
			break;
		case 17:
			if (k == "startTimeUnixNano")
				return field(r, v, SPAN_JSON_START);
			break;
		}
		return 0;
	}));
	return span_json__span_end(r.ctx);
}

/* Zipkin v2: {"traceId", "id", "parentId", "name", "kind", "timestamp" and
 * "duration" in µs, "localEndpoint": {"serviceName", "ipv4"/"ipv6"},
 * "tags": {k: v}, "shared"} */
int zipkin_span(reader &r, ondemand::object &o)
{
	CALL(span_json__span_begin(r.ctx));
	CALL(each_field(r, o, [&](string_view k, ondemand::value &v) {
		switch (k.size()) {
		case 2:
			if (k == "id")
				return field(r, v, SPAN_JSON_SPAN_ID);
			break;
		case 4:
			if (k == "name")
				return field(r, v, SPAN_JSON_OPERATION);
			if (k == "kind")
				return field(r, v, SPAN_JSON_KIND);
			if (k == "tags")
				return as_object(r, v, [&](ondemand::object &t) {
					return each_field(r, t, [&](string_view tk, ondemand::value &tv) {
						string_view val;
						bool have, is_string;

						CALL(text_of(r, tv, val, have, is_string));
						return have ? span_json__tag(r.ctx, SPAN_JSON_SPAN_TAG,
									     tk.data(), tk.size(),
									     val.data(), val.size())
							    : 0;
					});
				});
			break;
		case 6:
			if (k == "shared")
				return field(r, v, SPAN_JSON_SHARED);
			break;
		case 7:
			if (k == "traceId")
				return field(r, v, SPAN_JSON_TRACE_ID);
			break;
		case 8:
			if (k == "parentId")
				return field(r, v, SPAN_JSON_PARENT_ID);
			if (k == "duration")
				return field(r, v, SPAN_JSON_DURATION);
			break;
		case 9:
			if (k == "timestamp")
				return field(r, v, SPAN_JSON_START);
			break;
		case 13:
			if (k == "localEndpoint")
				return as_object(r, v, [&](ondemand::object &ep) {
					return each_field(r, ep, [&](string_view ek, ondemand::value &ev) {
						if (ek == "serviceName")
							return field(r, ev, SPAN_JSON_SERVICE);
						if (ek == "ipv4" || ek == "ipv6")
							return field(r, ev, SPAN_JSON_HOST);
						return 0;
					});
				});
			break;
		}
		return 0;
	}));
	return span_json__span_end(r.ctx);
}

/* One element of resourceSpans: {"resource": {"attributes": […]},
 * "scopeSpans" (older: "instrumentationLibrarySpans"): [{"spans": […]}]} */
int otlp_resource(reader &r, ondemand::object &o)
{
	CALL(span_json__proc_begin(r.ctx, nullptr, 0));
	return each_field(r, o, [&](string_view k, ondemand::value &v) {
		if (k == "resource")
			return as_object(r, v, [&](ondemand::object &res) {
				return each_field(r, res, [&](string_view rk, ondemand::value &rv) {
					return rk == "attributes"
						   ? tags(r, rv, true, SPAN_JSON_PROC_TAG)
						   : 0;
				});
			});
		if (k != "scopeSpans" && k != "instrumentationLibrarySpans")
			return 0;
		return each_object(r, v, [&](ondemand::object &scope) {
			return each_field(r, scope, [&](string_view sk, ondemand::value &sv) {
				if (sk != "spans")
					return 0;
				return each_object(
				    r, sv, [&](ondemand::object &sp) { return otlp_span(r, sp); });
			});
		});
	});
}

} // namespace

extern "C" {

bool span_json__utf8_ok(const char *buf, size_t len)
{
	return validate_utf8(buf, len);
}

struct span_json *span_json__new(void)
{
	return new (std::nothrow) span_json;
}

void span_json__free(struct span_json *j)
{
	delete j;
}

int span_json__parse(struct span_json *j, enum span_json_unit unit, const char *buf, size_t len,
		     void *ctx, const char **msg, size_t *at)
{
	reader r = {ctx, nullptr, SUCCESS};
	int ret = 1;

	try {
		ondemand::document doc;
		ondemand::value root;

		/* what stage 1 would check first: the raw walk checks the rest */
		if (unit != SPAN_JSON_ZIPKIN_SPANS && validate_utf8(buf, len)) {
			ret = span_json__raw_walk(unit, buf, len, ctx, nullptr, 0);
			if (ret != 1)
				return ret;
			span_json__rollback(ctx);
		}
		if (!(r.err = j->parser.iterate(buf, len, len + SIMDJSON_PADDING).get(doc)) &&
		    !(r.err = doc.get_value().get(root))) {
			if (unit == SPAN_JSON_JAEGER_TRACE)
				ret = as_object(r, root, [&](ondemand::object &o) {
					return jaeger_trace(r, o);
				});
			else if (unit == SPAN_JSON_ZIPKIN_SPANS)
				ret = each_object(r, root, [&](ondemand::object &o) {
					return zipkin_span(r, o);
				});
			else
				ret = each_object(r, root, [&](ondemand::object &o) {
					return otlp_resource(r, o);
				});
		}
	} catch (const std::bad_alloc &) {
		return -ENOMEM;
	}
	if (ret == 1) {
		if (r.err == MEMALLOC)
			return -ENOMEM;
		if (r.err == UTF8_ERROR && !r.last_key)
			return 2; /* found before the walk: nothing was handed on */
		*msg = error_message(r.err);
		*at = r.last_key ? (size_t)(r.last_key - buf) : 0;
	}
	return ret;
}

} /* extern "C" */
