#!/usr/bin/env bash
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
# Runs every benchmark (tools/bench/bench_*, executable) in turn. Each prints
# its own table of ratios measured in one run. Usage: tools/bench/run.sh BUILD
set -u
build=${1:-build}
export CRITPATH_BUILD=$(cd "$build" && pwd)
cd "$(dirname "$0")/../.." || exit 1
rc=0
for b in tools/bench/bench_*; do
	[ -x "$b" ] || continue
	if [ -n "${BENCH:-}" ] && [[ "$b" != *$BENCH* ]]; then continue; fi
	echo "== $(basename "$b")"
	"$b" || { echo "!! $(basename "$b") failed"; rc=1; }
	echo
done
exit $rc
