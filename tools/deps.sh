#!/usr/bin/env bash
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
# Installs the Debian packages the build, the tests, the demo and the
# benchmarks need, when they are missing. Idempotent; needs root to install.
set -eu
pkgs=(
	make gcc clang llvm pkg-config bpftool libbpf-dev libelf-dev zlib1g-dev libzstd-dev liblz4-dev
	libyajl-dev libsimdjson-dev libprotobuf-c-dev protobuf-c-compiler libcmocka-dev python3
	libssl-dev openssl liburing-dev libcapstone-dev libcurl4-openssl-dev
	golang-go chromium memcached redis-server redis-tools libmemcached-tools wrk postgresql
	mariadb-server mariadb-client nodejs dnsmasq-base nginx-light gunicorn nghttp2-server nghttp2-client
	golang-google-grpc-dev libbpf-tools bpftrace iproute2 nftables procps time linux-perf
	php-fpm php-cgi unbound libclang-rt-14-dev socat varnish
	clickhouse-server clickhouse-client
)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# The agent's tests: the OpenTelemetry JS packages (tests/agent/package-lock.json)
npm_deps() {
	[ -d tests/agent/node_modules/@opentelemetry/otlp-transformer ] && return 0
	command -v npm >/dev/null || { echo "deps: npm is missing (Node.js's package manager)" >&2; return 1; }
	echo "deps: installing tests/agent's npm packages"
	(cd tests/agent && npm ci --no-audit --no-fund --loglevel=error)
}
cd "$(dirname "$0")/.."
[ "${#missing[@]}" -eq 0 ] && { echo "deps: all ${#pkgs[@]} packages present"; npm_deps; exit; }
if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing ${missing[*]}; run 'sudo make deps' (installing needs root)" >&2
	exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
# Debian starts these on install; tests start their own instances.
fpm=$(cd /etc/init.d 2>/dev/null && ls -d php*-fpm 2>/dev/null || true)
for s in memcached redis-server postgresql mariadb nginx unbound varnish varnishncsa \
	clickhouse-server $fpm; do
	systemctl stop "$s" 2>/dev/null || service "$s" stop 2>/dev/null || true
done
npm_deps
