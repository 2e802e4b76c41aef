#!/usr/bin/env bash
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
# Recording write/read throughput (the compiled bench_recording.c), for run.sh.
exec "${CRITPATH_BUILD:-build}/bench/bench_recording" "$@"
