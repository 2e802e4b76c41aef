#!/usr/bin/env bash
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
# The test runner. Every test program speaks TAP ("ok N - name" / "not ok N -
# name"): cmocka unit tests with CMOCKA_MESSAGE_OUTPUT=TAP, integration tests
# through tests/integration/tap.py. A program that dies without reporting, or
# exits non-zero with no "not ok" line, counts as one failure under its own
# name. Ends with the line "N passed, N failed".
#
#   tests/run.sh BUILD [ASAN_BUILD [TSAN_BUILD [FUZZ_BUILD]]]
#                                        unit (+ASan, +TSan unit, +fuzzers for
#                                        FUZZ_SECONDS each, default 20) + integration (root;
#                                        +test_agent.py, test_store_agent.py,
#                                         test_store_report.py with ASAN_BUILD's critpath)
#   tests/run.sh --unit-only BUILD
#   TESTS=pattern tests/run.sh …         only programs whose name matches
set -u
unit_only=0
if [ "${1:-}" = "--unit-only" ]; then unit_only=1; shift; fi
build=${1:-build}
asan=${2:-}
tsan=${3:-}
fuzz=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
pass=0 fail=0 skip=0
failed=()
log=$(mktemp -d /tmp/critpath-tests.XXXXXX)

run_one() { # label timeout cmd...
	local label=$1 to=$2; shift 2
	local out="$log/$(echo "$label" | tr '/ ' '__').out"
	if [ -n "${TESTS:-}" ] && [[ "$label" != *$TESTS* ]]; then return; fi
	echo "# --- $label"
	CMOCKA_MESSAGE_OUTPUT=TAP CRITPATH_BUILD="$top/$build" timeout -k 10 "$to" "$@" >"$out" 2>&1
	local rc=$? p f s
	grep -E '^(not )?ok ' "$out" | sed "s|^|  |"
	# cmocka reports a skipped test as "not ok N # SKIP": a skip, not a failure
	p=$(grep -E '^ok ' "$out" | grep -vc '# SKIP')
	s=$(grep -E '^(not )?ok ' "$out" | grep -c '# SKIP')
	f=$(grep -E '^not ok ' "$out" | grep -vc '# SKIP')
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
		echo "  not ok - $label exited with status $rc (timeout is 124); last output:"
		tail -n 15 "$out" | sed 's/^/    /'
	elif [ "$f" -gt 0 ]; then
		grep -E -A12 '^not ok ' "$out" | grep -E '^#|^  ' | head -40 | sed 's/^/    /'
	fi
	pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
	[ "$f" -gt 0 ] && failed+=("$label")
	return 0
}

cd "$top" || exit 1
for t in "$build"/tests/test_*; do
	[ -x "$t" ] || continue
	run_one "unit/$(basename "$t")" 300 "$t"
done
if [ -n "$asan" ]; then
	for t in "$asan"/tests/test_*; do
		[ -x "$t" ] || continue
		ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
			run_one "asan/$(basename "$t")" 600 "$t"
	done
fi
if [ -n "$tsan" ]; then
	for t in "$tsan"/tests/test_*; do
		[ -x "$t" ] || continue
		TSAN_OPTIONS=halt_on_error=1:exitcode=66 run_one "tsan/$(basename "$t")" 600 "$t"
	done
fi
if [ -n "$fuzz" ] && [ -d "$fuzz/fuzz" ]; then
	run_one "fuzz" 900 tools/fuzz.sh "$fuzz" "${FUZZ_SECONDS:-20}" "$build"
fi
if [ "$unit_only" -eq 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "# integration tests need root (they load BPF programs): skipped"
	else
		for t in tests/integration/test_*; do
			[ -x "$t" ] || continue
			run_one "integration/$(basename "$t")" 900 "$t"
		done
		# the agent (meant to run for days) and the store's writer and
		# reader once more under ASan and UBSan, against the plain build's
		# demo: a report fails its checks
		if [ -n "$asan" ] && [ -x "$asan/critpath" ]; then
			for t in test_agent.py test_store_agent.py test_store_report.py; do
				CRITPATH_BIN="$top/$asan/critpath" \
				ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
				UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
					run_one "asan-int/$t" 900 "tests/integration/$t"
			done
		elif [ -n "$asan" ]; then
			echo "# no $asan/critpath (make BUILD=$asan SAN=1 critpath): asan-int skipped"
		fi
	fi
fi
echo
[ "${#failed[@]}" -gt 0 ] && echo "# failed in: ${failed[*]} (logs in $log)"
[ "$skip" -gt 0 ] && echo "# $skip skipped"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
