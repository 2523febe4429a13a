#!/usr/bin/env bash
# Installs what building and running lb needs on Debian 12; with --test,
# also what the test suite needs (openssl for test certificates, chromium for
# the dashboard test, dnsmasq-base for the DNS discovery tests (the binary
# only: no service is started), mariadb-server, postgresql and redis-server
# for the protocol checks' tests (which start their own servers on free
# ports; on a machine with systemd the packages also start their system
# services, which the tests do not use), keepalived, bird2 and iproute2
# for the tier tests in network namespaces (VRRP, BGP), man-db and systemd
# for the package test (man -l, systemd-analyze security; systemd need not
# be running), prometheus for the alert rules' test (promtool checks
# deploy/prometheus/lb.rules.yml, and the test runs its own prometheus on a
# free port with its own data directory; on a machine with systemd the
# package also starts a system service on :9090, which the test does not
# use), clang and its runtime libraries for
# the fuzz targets: libFuzzer and the sanitizers are in libclang-rt-14-dev,
# which clang only recommends), haproxy and nginx for the PROXY protocol
# tests (HAProxy in front of lb, nginx behind it, each started by the test
# in its own directory; on a machine with systemd the packages also start
# their system services on :80, which the tests do not use), unbound as
# the second DNS server behind the UDP frontends and the dns check, dnsutils
# for dig (the UDP tests' client), dnsperf and libnginx-mod-stream for the
# UDP bench (nginx's stream module is the peer there; on a machine with
# systemd unbound also starts a system service on :53, which the tests do
# not use), etcd-server and etcd-client for the etcd discovery tests (the
# test starts its own etcd on free ports with its data in a temp dir; on a
# machine with systemd the package also starts a system service on :2379,
# which the test does not use). Safe to run again: it calls apt-get only when something is
# missing.
set -euo pipefail

PKGS=(gcc make cmake pkg-config libevent-dev libssl-dev libinih-dev libnghttp2-dev libjansson-dev
      python3 curl)
if [ "${1:-}" = "--test" ]; then
    PKGS+=(openssl chromium dnsmasq-base mariadb-server postgresql redis-server
           keepalived bird2 iproute2 man-db systemd prometheus clang libclang-rt-14-dev
           haproxy nginx libnginx-mod-stream unbound dnsutils dnsperf python3-grpcio
           etcd-server etcd-client)
fi

missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "install-deps: installing ${missing[*]}" >&2
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
