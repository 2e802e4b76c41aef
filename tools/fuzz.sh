#!/usr/bin/env bash
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
# Runs each libFuzzer harness (FUZZ_BUILD/fuzz/fuzz_*) for SECONDS from seed
# corpora the project's own tools make (BUILD: gen_traces, and a real
# recording of `sleep` when run as root), and says in TAP what each found.
#   tools/fuzz.sh FUZZ_BUILD SECONDS [BUILD]
set -u
fz=${1:?usage: tools/fuzz.sh FUZZ_BUILD SECONDS [BUILD]}
secs=${2:-20}
build=${3:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/critpath-fuzz.XXXXXX)
n=0 bad=0

seed_span() {
	local d=$1
	cp "$top"/tests/unit/data/*.json "$d/" 2>/dev/null
	if [ -x "$build/bench/gen_traces" ]; then
		"$build/bench/gen_traces" --traces 3 --fanout 2 --depth 2 --format jaeger -o "$d/jaeger.json" \
			>/dev/null 2>&1
		"$build/bench/gen_traces" --traces 3 --fanout 2 --depth 2 --format otlp -o "$d/otlp.json" \
			>/dev/null 2>&1
	fi
	printf '[{"traceId":"a1","id":"01","name":"get","timestamp":1700000000000000,"duration":100,"localEndpoint":{"serviceName":"s"}}]' \
		>"$d/zipkin.json"
}

seed_proto() {
	local d=$1
	printf 'GET /cart?id=1 HTTP/1.1\r\nHost: x\r\n\r\n' >"$d/http"
	printf 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok' >"$d/status"
	printf '*2\r\n$3\r\nGET\r\n$1\r\nk\r\n' >"$d/resp"
	printf 'get k\r\nset k 0 0 1\r\nv\r\n' >"$d/memcached"
	printf '\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x03www\x02kp\x04test\x00\x00\x01\x00\x01' >"$d/dns"
	# HPACK (RFC 7541 C.4.1): :method GET, :scheme http, :path /, :authority, Huffman
	printf '\x82\x86\x84\x41\x8c\xf1\xe3\xc2\xe5\xf2\x3a\x6b\xa0\xab\x90\xf4\xff' >"$d/hpack"
}

# the control bytes and NUL-separated strings tests/fuzz/fuzz_otlp.c reads
seed_otlp() {
	local d=$1
	printf '\x01\x17\xc8\x00GET /item/{n}\x00/item/42?x=1\x00frontend:8080\x00\x00host-1\x00h0\x00/usr/bin/srv\x00\x00vendor=1\x00worker-1\x00postgres\x00db:5432\x00handle\x0010.0.0.7:5432\x00cache-maint\x0010.0.0.1:80\x00[::1]:5555\x00host-2' \
		>"$d/http"
	printf '\x03\x31\xf7\x01POST /helloworld.Greeter/SayHello\x00/helloworld.Greeter/SayHello\x00svc\x00otel-svc\x00h\x00h\x00/x\x00\x00ts\x00w\x00o\x00d\x00p\x0010.0.0.2:50051' \
		>"$d/grpc"
	printf '\x04\x0f\x00\x00GET k\x00\x00redis:6379' >"$d/redis"
	printf '\x02\x12\xf4\x01GET /caf\xc3\xa9/\xe2\x82\xac\x00/caf\xc3\xa9?q=\xf0\x9f\x98\x80\x00svc\xc3\xa9' >"$d/utf8"
}

# a clickhouse:// URL, then a TabSeparated answer as ClickHouse writes one
seed_clickhouse() {
	local d=$1
	printf 'clickhouse://u:p%%40w@[::1]:8123/fleet\n1\tGET /x\\tb\t\\N\t-5\n2\t\t[1,-2]\t[\x27a\\\x27b\x27,\x27\x27]\n' \
		>"$d/rows"
	printf 'clickhouse://h/db\nfrontend\t[\x27frontend\x27,\x27GET /\x27,\x27kv_get\x27]\t0\t123456' >"$d/steps"
}

seed_recording() {
	local d=$1
	if [ "$(id -u)" -eq 0 ] && [ -x "$build/critpath" ]; then
		"$build/critpath" record -q -o "$d/sleep.rec" -d 2 -- sleep 0.2 >/dev/null 2>&1 || true
		# a cut copy: the reader's way of stopping early is input too
		[ -s "$d/sleep.rec" ] && head -c 600 "$d/sleep.rec" >"$d/cut.rec"
	fi
	printf 'CRITPREC' >"$d/magic"
}

for h in "$fz"/fuzz/fuzz_*; do
	[ -x "$h" ] || continue
	name=$(basename "$h")
	corpus="$work/$name"
	mkdir -p "$corpus"
	case "$name" in
	fuzz_span) seed_span "$corpus" ;;
	fuzz_proto) seed_proto "$corpus" ;;
	fuzz_recording) seed_recording "$corpus" ;;
	fuzz_otlp) seed_otlp "$corpus" ;;
	fuzz_clickhouse) seed_clickhouse "$corpus" ;;
	esac
	n=$((n + 1))
	log="$work/$name.log"
	# -close_fd_mask=3: the code under test's own stdout and stderr are
	# not the fuzzer's report
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		"$h" -max_total_time="$secs" -close_fd_mask=3 -artifact_prefix="$work/$name-" \
		"$corpus" >"$log" 2>&1
	rc=$?
	runs=$(grep -oE 'Done [0-9]+ runs' "$log" | tail -n 1 | grep -oE '[0-9]+')
	if [ "$rc" -eq 0 ]; then
		echo "ok $n - $name: ${runs:-?} runs in ${secs} s, no finding"
	else
		bad=$((bad + 1))
		echo "not ok $n - $name: a finding after ${runs:-?} runs (exit $rc); input and log in $work"
		grep -E 'ERROR|runtime error|SUMMARY|Test unit written' "$log" | head -n 8 | sed 's/^/# /'
	fi
done
echo "1..$n"
[ "$bad" -eq 0 ] && rm -rf "$work"
[ "$bad" -eq 0 ]
