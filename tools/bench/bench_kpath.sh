#!/usr/bin/env bash
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
# Kernel-path analysis throughput (the compiled bench_kpath.c), for run.sh.
exec "${CRITPATH_BUILD:-build}/bench/bench_kpath" "$@"
