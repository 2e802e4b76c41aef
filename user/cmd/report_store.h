/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* report's store input: clickhouse://HOST:PORT/DB[?FILTERS] (docs/store.md) */
#ifndef CRITPATH_REPORT_STORE_H
#define CRITPATH_REPORT_STORE_H

#include <stdbool.h>

#include "engine.h"

bool report__is_store(const char *input);
/* The store's requests into e, aggregated in the database: 1, 0 with *why
 * (no store there, nothing matches), or -errno */
int report__store(const char *src, struct engine *e, const char **why);

#endif
