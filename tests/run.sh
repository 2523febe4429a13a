#!/usr/bin/env bash
# Builds lb three times (optimised; with AddressSanitizer + UndefinedBehavior-
# Sanitizer; with ThreadSanitizer), runs the whole suite against the first
# two with ctest, and the tests that exercise lb's threads against the third;
# between the last two, runs the libFuzzer targets (tests/fuzz) built by
# clang in a fourth build.
set -euo pipefail
cd "$(dirname "$0")/.."

deploy/install-deps.sh --test

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j2
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DLB_SANITIZE=ON >/dev/null
cmake --build build-asan -j2
# Debug (asserts on) at -O1: the optimisation TSan's authors recommend. The
# TSan subset is mostly waiting (under a third of its wall time is CPU), so
# -O0 would buy nothing but slower runs, and -O1 keeps file:line and frames
# (-fno-omit-frame-pointer) exact enough to read a report.
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_C_FLAGS_DEBUG=-g -O1" \
      -DLB_TSAN=ON >/dev/null
cmake --build build-tsan -j2
# The fuzz targets only (--target fuzz), with asserts on, at -O1 as
# libFuzzer's documentation builds them: fast, and the stacks stay exact.
# LB_FUZZ_SECONDS is given each time: a longer run configured by hand in
# build-fuzz must not make the suite's run longer.
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
      "-DCMAKE_C_FLAGS_DEBUG=-g -O1" -DLB_FUZZ=ON -DLB_FUZZ_SECONDS=8 >/dev/null
cmake --build build-fuzz -j2 --target fuzz

# A sanitizer report fails the process that made it, and the integration
# harness also fails a test whose lb wrote one to its log.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# TSan goes on after a report (every race of a run is printed to lb's
# stderr, which the harness reads) and makes the process exit 66 at the end
# (the harness also fails a test whose lb exits non-zero).
TSAN_OPTIONS="halt_on_error=0:exitcode=66:second_deadlock_stack=1:history_size=4"
TSAN_OPTIONS+=":suppressions=$PWD/tests/tsan.supp"
# The TSan run: unit tests (cheap) and the integration tests that drive lb's
# worker, health and admin threads against its main thread (reloads, admin
# actions and stats, server removal, health checks), and the queue and
# burst tests, whose slots and grants cross between workers, and discovery
# (main's rounds and members reloads, the admin thread's /stats), and
# the hand-over (lb -x), whose admin socket changes hands under the admin
# thread, and more workers than CPUs (their loops take turns), and a
# listener's close (its retiring socket's accepts against main's stop) and
# connect pacing (each worker's window against the server's shared figures)
# and routes by name (route counts kept across reloads, read by /stats),
# and UDP flows (each worker's table against the frontend's shared flow
# count and main's reloads), and agents (main sets a cap the workers read,
# the admin thread reads the verdict), and outlier detection (the workers'
# errors posted to main, which ejects; the admin thread reads it).
TSAN_TESTS='^(unit/|integration/test_(reload|admin|removal|health)_|integration/test_(queue|burst|discover|takeover|workers_shared|listener_close|connect_pacing|sni_route|udp|agent_check|outlier)$)'
# ... but test_admin_limits, whose deadlines and descriptor limits are the
# admin thread's own (25 s of waiting, no other thread involved).
TSAN_SKIP='^integration/test_admin_limits$'

# gcc 12's TSan runtime maps its shadow memory at fixed addresses and dies
# with "FATAL: ThreadSanitizer: unexpected memory mapping" when the kernel
# randomises mmap with more bits than it supports (vm.mmap_rnd_bits = 32 on
# some newer kernels and distributions; newer runtimes re-exec themselves
# without ASLR, this one does not). `setarch -R` turns ASLR off for one
# process tree, needs no privilege, changes nothing machine-wide and is
# inherited across fork and exec: ctest -> python3 -> lb all get it, with no
# change to the harness. Where personality() is refused (some container
# seccomp profiles), lower the sysctl instead, as root.
tsan_run=()
if setarch "$(uname -m)" -R true 2>/dev/null; then
    tsan_run=(setarch "$(uname -m)" -R)
fi
tsan_probe() {
    TSAN_OPTIONS="$TSAN_OPTIONS" "${tsan_run[@]}" build-tsan/lb -t -c conf/lb.ini 2>&1
}
if ! out=$(tsan_probe); then
    bits=$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 0)
    if [ "$(id -u)" -eq 0 ] && [ "$bits" -gt 28 ]; then
        echo "run.sh: TSan does not start; lowering vm.mmap_rnd_bits from $bits to 28" >&2
        sysctl -q -w vm.mmap_rnd_bits=28
        out=$(tsan_probe) || { echo "$out" >&2; exit 1; }
    else
        echo "$out" >&2
        echo "run.sh: the TSan build does not start (try: sysctl vm.mmap_rnd_bits=28 as root)" >&2
        exit 1
    fi
fi

# The short soak (40 s of kills, reloads and admin actions) runs in the
# ASan build only: what it finds there (a leak, a use after free) it finds
# with the reports, and the suite stays under 20 minutes on 2 cores.
# Two tests at a time in each build: the suite mostly waits (for checks to
# rise and fall, for timeouts, for peers to start), using a quarter of the
# two CPUs run one at a time, and each test's servers take free ports at
# random (harness.free_port) and its namespaces unique names. Its bounds
# hold with a neighbour: they hold under the sanitizers already.
echo "== tests: optimised build"
# The etcd churn is 3 minutes of light load (200 connections a second, a
# change every 1.2 s) that mostly waits: it runs beside the two slots of the
# others instead of holding one of them, and its output follows theirs.
(cd build && ctest --output-on-failure -R '^integration/test_discover_etcd_churn$' \
     >churn.log 2>&1; echo $? >churn.rc) &
churn=$!
(cd build && ctest -j2 --output-on-failure \
     -E '^(stress/soak_short|integration/test_discover_etcd_churn)$')
wait "$churn"
cat build/churn.log
[ "$(cat build/churn.rc)" = 0 ]
# The tier tests (network namespaces, keepalived, BIRD) run once, in the
# optimised build: they test the engines around lb more than its memory.
# So does test_package: a package is made of the optimised build (in the
# ASan build it would only skip, and CI=true shows no skip). So do the
# alert rules' and the dashboard's tests: they judge Prometheus's reading of
# lb's metric names and series, which the ASan build serves alike. So does
# the etcd churn: 3 minutes of load the ASan build would only make longer
# (the etcd source's memory is the other etcd tests' and its fuzzer's).
echo "== tests: ASan + UBSan build"
(cd build-asan && ctest -j2 --output-on-failure \
     -E '^integration/test_(tier_.*|package|prometheus_rules|grafana_dashboard|discover_etcd_churn)$')
# Each target for LB_FUZZ_SECONDS (8 s), two at a time: a crash, leak,
# slow input or sanitizer report fails it, and the input is kept under
# build-fuzz/tests/fuzz/artifacts/.
echo "== fuzzing (tests/fuzz)"
(cd build-fuzz && ctest --output-on-failure -L fuzz -j2)
echo "== tests: TSan build (threaded tests)"
(cd build-tsan && TSAN_OPTIONS="$TSAN_OPTIONS" "${tsan_run[@]}" \
     ctest -j2 --output-on-failure -R "$TSAN_TESTS" -E "$TSAN_SKIP")
