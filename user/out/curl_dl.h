/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* libcurl, loaded by the first HTTP client (the OTLP exporter, the
 * ClickHouse store), not at start: it brings some thirty libraries, whose
 * loading cost every other command 3-4 ms. */
#ifndef CRITPATH_CURL_DL_H
#define CRITPATH_CURL_DL_H

#include <time.h>
#define CURL_DISABLE_TYPECHECK /* its calls go through cu below */
#include <curl/curl.h>

struct curl_dl {
	CURLcode (*global_init)(long);
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_perform)(CURL *);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	const char *(*easy_strerror)(CURLcode);
	void (*easy_cleanup)(CURL *);
	time_t (*getdate)(const char *, const time_t *);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
};
extern struct curl_dl cu;

/* Loads libcurl once (any thread): NULL when its functions are in cu, else
 * why not ("cannot load libcurl: ...") */
const char *curl_dl__load(void);

#endif
