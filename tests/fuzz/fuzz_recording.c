// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* libFuzzer harness: a recording (header, frames, trailer: cut, flipped or
 * made up) through the reader, the kernel-level analysis and the engine,
 * as `critpath report` takes it. A recording the reader refuses must say
 * why. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "engine.h"
#include "kpath.h"
#include "recording.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[] = "/tmp/critpath-fuzz-rec-XXXXXX";
	const char *paths[] = {path};
	struct recording_reader *r = NULL;
	struct engine *e;
	int fd = mkstemp(path);

	if (fd < 0)
		return 0;
	if (write(fd, data, size) != (ssize_t)size) {
		close(fd);
		unlink(path);
		return 0;
	}
	close(fd);
	if (recording_reader__open(&r, path, RECORDING_TIME_ORDER) < 0) {
		const char *why = recording_reader__open_error();

		if (!why || !why[0])
			abort(); /* refused without saying why */
	} else {
		recording_reader__close(r);
	}
	e = engine__new(&(struct engine_opts){.keep_all_requests = true});
	if (e) {
		engine__set_quiet(e, true);
		(void)kpath__analyze(paths, 1, (struct cp_sink[]){engine__sink(e)},
				     &(struct kpath_opts){.quiet = true});
		(void)engine__result(e);
		engine__free(e);
	}
	unlink(path);
	return 0;
}
