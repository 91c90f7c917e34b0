#!/usr/bin/env bash
# CI's hardening stage, after `npm test` (.ci/run): what the test suite's bounded runs cannot afford.
#
#   1. the native and reader tests (test/native, test/lsh, test/network, test/datasets) on the
#      addon built with AddressSanitizer + UndefinedBehaviorSanitizer (scripts/test-asan.sh; a report fails
#      the run), bounded by a time limit;
#   2. the fuzzers, each for a fixed number of seeded cases, every case a function of (seed, index):
#      data files (bench/fuzz.ts: the XC and LIBSVM readers), model files (bench/fuzz.ts: mutated and crafted
#      models and checkpoints, loaded, predicted and trained on the sanitized addon) and HTTP
#      (bench/fuzz-http.ts: malformed requests to `sublinear serve`, its memory watched).
#
# The seed is printed first; SUBLINEAR_FUZZ_SEED=<n> runs another (CI keeps one seed so that its result
# does not change from run to run; a failure is replayed with the seed and the case index printed).
# SUBLINEAR_FUZZ_CASES=<n> changes the number of cases of each fuzzer (default 10000).
set -euo pipefail
cd "$(dirname "$0")/.."
SEED=${SUBLINEAR_FUZZ_SEED:-20261127}
CASES=${SUBLINEAR_FUZZ_CASES:-10000}
echo "hardening: fuzz seed $SEED, $CASES cases per fuzzer (SUBLINEAR_FUZZ_SEED / SUBLINEAR_FUZZ_CASES change them)"
stage() { echo "hardening: $1 ($(date -u +%H:%M:%S))"; }

stage 'native and reader tests under AddressSanitizer + UndefinedBehaviorSanitizer'
# 20 minutes at most (about 4 on a 2-core machine, the build included): a hang must not eat CI's time.
timeout 1200 bash scripts/test-asan.sh test/native test/lsh test/network test/datasets
# dist/ was compiled by npm test and again by the run above.
export SUBLINEAR_ASAN_NO_TSC=1

# Case files on a RAM disk where there is one (the fuzzers write thousands of small files).
FUZZ_TMP=${TMPDIR:-/tmp}
[ -d /dev/shm ] && [ -w /dev/shm ] && FUZZ_TMP=/dev/shm

stage "data-file fuzzer: $CASES cases of XC and LIBSVM files"
TMPDIR=$FUZZ_TMP timeout 1200 node dist/bench/fuzz.js --cases "$CASES" --targets xc,libsvm --seed "$SEED" --time-limit-ms 10000

stage "model-file fuzzer: $CASES mutated and crafted models and checkpoints, on the sanitized addon"
TMPDIR=$FUZZ_TMP timeout 1800 bash scripts/test-asan.sh --exec node dist/bench/fuzz.js --cases "$CASES" \
  --targets model,checkpoint,crafted-model,crafted-checkpoint --seed "$SEED" --time-limit-ms 20000

# On the regular addon: a malformed request never reaches the kernels, and ASan's quarantine of freed
# memory (256 MB) would hide what the server's resident memory does.
stage "HTTP fuzzer: $CASES malformed requests to sublinear serve"
timeout 1200 node dist/bench/fuzz-http.js --requests "$CASES" --seed "$SEED"
stage 'done'
echo "hardening: 4 passed, 0 failed"
