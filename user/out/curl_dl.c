// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "curl_dl.h"

struct curl_dl cu;
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;
static char cu_error[256];

static void cu_load(void)
{
	void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
	struct {
		void **fn;
		const char *name;
	} syms[] = {
	    {(void **)&cu.global_init, "curl_global_init"},
	    {(void **)&cu.easy_init, "curl_easy_init"},
	    {(void **)&cu.easy_setopt, "curl_easy_setopt"},
	    {(void **)&cu.easy_perform, "curl_easy_perform"},
	    {(void **)&cu.easy_getinfo, "curl_easy_getinfo"},
	    {(void **)&cu.easy_strerror, "curl_easy_strerror"},
	    {(void **)&cu.easy_cleanup, "curl_easy_cleanup"},
	    {(void **)&cu.getdate, "curl_getdate"},
	    {(void **)&cu.slist_append, "curl_slist_append"},
	    {(void **)&cu.slist_free_all, "curl_slist_free_all"},
	};

	if (!h) {
		snprintf(cu_error, sizeof(cu_error), "cannot load libcurl: %s", dlerror());
		return;
	}
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++)
		if (!(*syms[i].fn = dlsym(h, syms[i].name))) {
			snprintf(cu_error, sizeof(cu_error), "libcurl.so.4 lacks %s", syms[i].name);
			cu.easy_init = NULL;
			return;
		}
	cu.global_init(CURL_GLOBAL_DEFAULT);
}

const char *curl_dl__load(void)
{
	pthread_once(&cu_once, cu_load);
	return cu.easy_init ? NULL : cu_error;
}
