#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time, as ctest's test fuzz/NAME:
#   run_target.sh BINARY SEEDS SECONDS ARTIFACTS [DICT]
# libFuzzer adds every input that finds new coverage to its first corpus
# directory, so it works on a copy of the committed seeds (SEEDS), which
# stay as they are. It exits non-zero on a crash, a leak, an input slower
# than 10 s, more than 2 GiB of memory, or a sanitizer report, and then
# writes the input that did it under ARTIFACTS: rerun the target on that
# file to reproduce.
set -euo pipefail
bin=$1 seeds=$2 seconds=$3 artifacts=$4 dict=${5:-}

work=$(mktemp -d "${TMPDIR:-/tmp}/lb-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
if [ -d "$seeds" ]; then
    cp -R "$seeds/." "$work/"
fi
mkdir -p "$artifacts"

args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048
      -print_final_stats=1 -artifact_prefix="$artifacts/")
if [ -n "$dict" ]; then
    args+=(-dict="$dict")
fi
# Leaks count as failures; UBSan's reports are fatal already
# (-fno-sanitize-recover), the stack trace says where.
export ASAN_OPTIONS="detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# libFuzzer prints a line for each input that adds coverage: thousands in
# a run, which would push a crash report out of what ctest keeps of a
# failed test's output. Its first and last status lines stay.
set +e
"$bin" "${args[@]}" "$work" 2>&1 |
    grep -Ev '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse)[[:space:]]'
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -ne 0 ]; then
    echo "run_target.sh: $(basename "$bin") failed (exit $rc); the input is in $artifacts/" >&2
    exit 1
fi
