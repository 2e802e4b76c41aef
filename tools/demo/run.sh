#!/usr/bin/env bash
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
# The demo (`sudo make demo`): a small two-process shop on loopback, traced
# for five seconds under load, then its slowest requests' critical paths.
#
#   frontend  HTTP/1.1, acceptor + worker pool, an in-process cache under one
#             lock, and a "cache-maint" thread that holds that lock for ~15 ms
#             of CPU every 200 ms
#   kvstore   the downstream key-value service the workers call on a miss
#   loadgen   closed-loop clients (GET /item/K, GET /cart?id=K)
#
# Usage: tools/demo/run.sh BUILD   (ports: DEMO_PORT, DEMO_KV_PORT; the
# recording, report and page go to DEMO_OUT, BUILD by default)
set -u
build=${1:-build}
if ! build=$(cd "$build" 2>/dev/null && pwd); then
	echo "demo: no build directory '${1:-build}'" >&2
	exit 1
fi
critpath=$build/critpath
bin=$build/demo
port=${DEMO_PORT:-18080}
kv_port=${DEMO_KV_PORT:-18211}
secs=${DEMO_SECONDS:-5}
out=${DEMO_OUT:-$build}
rec=$out/demo.rec
html=$out/demo.html
log=$out/demo.log

for b in "$critpath" "$bin/frontend" "$bin/kvstore" "$bin/loadgen"; do
	[ -x "$b" ] || { echo "demo: $b is missing: run 'make BUILD=$build' first" >&2; exit 1; }
done
if [ "$(id -u)" -ne 0 ]; then
	echo "demo: critpath record needs root (it loads BPF programs): run 'sudo make demo'" >&2
	exit 1
fi

pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	pids=()
}
trap cleanup EXIT
trap 'echo; echo "demo: interrupted" >&2; exit 130' INT TERM

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_port() { # port pid name
	local i
	for i in $(seq 50); do
		port_busy "$1" && return 0
		kill -0 "$2" 2>/dev/null || break
		sleep 0.1
	done
	echo "demo: $3 did not start listening on 127.0.0.1:$1 (see $log)" >&2
	exit 1
}
for p in "$port" "$kv_port"; do
	if port_busy "$p"; then
		echo "demo: 127.0.0.1:$p is already in use; set DEMO_PORT / DEMO_KV_PORT" >&2
		exit 1
	fi
done

: >"$log"
"$bin/kvstore" --port "$kv_port" 2>>"$log" &
kv=$!
pids+=("$kv")
wait_port "$kv_port" "$kv" kvstore
"$bin/frontend" --port "$port" --kv-port "$kv_port" --workers 4 \
	--maint-period-ms 200 --maint-hold-ms 15 2>>"$log" &
front=$!
pids+=("$front")
wait_port "$port" "$front" frontend
echo "demo: frontend (pid $front) on 127.0.0.1:$port calls kvstore (pid $kv) on 127.0.0.1:$kv_port"

# load for longer than the recording, so the whole window is busy
"$bin/loadgen" --port "$port" -c 4 -d $((secs + 4)) --think-ms 2 >"$out/demo.loadgen" 2>&1 &
load=$!
pids+=("$load")
sleep 1
# three of the front end's functions as subcomponents of the paths (uprobes)
probes=(--probe lookup --probe kv_get --probe price_cart)
echo "demo: recording both processes for $secs s under load:"
echo "      critpath record -p $front,$kv ${probes[*]} -d $secs -o $rec"
if ! "$critpath" record -p "$front,$kv" "${probes[@]}" -d "$secs" -o "$rec"; then
	echo "demo: critpath record failed" >&2
	exit 1
fi
wait "$load"
grep -v '^RESULT' "$out/demo.loadgen"
cleanup

echo
echo "demo: the three slowest requests and what held them up: critpath report $rec --requests 3"
echo
"$critpath" report "$rec" --requests 3 | tee "$out/demo.txt"
if [ "${PIPESTATUS[0]}" -ne 0 ]; then
	echo "demo: critpath report failed" >&2
	exit 1
fi
if ! grep -q "frontend:$port ; GET" "$out/demo.txt"; then
	echo "demo: the report shows no request of the front end: that is a bug of critpath's;" >&2
	echo "      please report it with $rec attached" >&2
	exit 1
fi
# its warnings are the text report's, printed above already
if "$critpath" report "$rec" --format html -o "$html" 2>>"$log"; then
	echo
	echo "demo: the full picture (flame graph, heat map, every request) is in $html"
	echo "      open it in a browser; it works offline. The recording is $rec."
else
	echo "demo: critpath report --format html failed:" >&2
	tail -n 5 "$log" >&2
	exit 1
fi
if grep -q cache-maint "$out/demo.txt"; then
	echo "demo: note 'cache-maint' above: the thread holding the cache lock. It serves no"
	echo "      request, yet it is on the critical path of the slow ones."
fi
if grep -qE "; (lookup|price_cart) ;" "$out/demo.txt"; then
	echo "demo: steps like 'GET /cart ; lookup ; kv_get ; cpu' are time inside those functions"
	echo "      of the front end, named with --probe (uprobes on its own symbols)."
fi
if grep -q "(other requests)" "$out/demo.txt"; then
	echo "demo: '(other requests)' is a worker's time on another request while this one"
	echo "      waited for it (a busy worker, or kvstore's loop serving other callers)."
fi
