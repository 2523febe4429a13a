#!/usr/bin/env bash
# Builds lb twice (optimised, and with AddressSanitizer + UndefinedBehavior-
# Sanitizer) and runs the whole suite against each build with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."

deploy/install-deps.sh --test

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j2
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DLB_SANITIZE=ON >/dev/null
cmake --build build-asan -j2

# A sanitizer report fails the process that made it, and the integration
# harness also fails a test whose lb wrote one to its log.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

echo "== tests: optimised build"
(cd build && ctest --output-on-failure)
echo "== tests: ASan + UBSan build"
(cd build-asan && ctest --output-on-failure)
