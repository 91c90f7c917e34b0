#!/usr/bin/env bash
# `npm run test:asan`: builds the addon with AddressSanitizer + UndefinedBehaviorSanitizer in a separate
# directory and runs the tests that exercise native code against that build.
#
#   npm run test:asan                      # test/lsh test/network test/train test/native
#                                          # test/cli/train-checkpoint.test.ts test/cli/train-faults.test.ts
#   npm run test:asan -- test/lsh/query.test.ts   # only these tests
#   npm run test:asan -- --exec node dist/bench/fuzz.js --cases 100   # any command, on the sanitized addon
#
# The build never touches build/ (other builds and running tests use build/Release): binding.gyp and
# native/ are copied (mtimes kept, so rebuilds are incremental) to $SUBLINEAR_ASAN_DIR (default
# ${TMPDIR:-/tmp}/sublinear-asan-<uid>-<checksum of the checkout's path>, so that two checkouts never share a
# build) with the sanitizer flags added, and the tests load that addon
# through SUBLINEAR_ADDON (src/native/addon.ts). libasan must be loaded before anything else in the process,
# hence LD_PRELOAD; detect_leaks=0 because Node itself does not free everything at exit. UBSan reports
# halt the process, so a report fails the test run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${SUBLINEAR_ASAN_DIR:-${TMPDIR:-/tmp}/sublinear-asan-$(id -u)-$(pwd -P | cksum | cut -d" " -f1)}
GYP=${npm_config_node_gyp:-}
for c in "$GYP" /usr/lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js "$(dirname "$(command -v node)")/../lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js"; do
  if [ -n "$c" ] && [ -f "$c" ]; then GYP=$c; break; fi
done
[ -f "$GYP" ] || { echo "test:asan: cannot find node-gyp" >&2; exit 1; }
NODEDIR=$(node -p "require('path').resolve(process.execPath, '../..')")
[ -f "$NODEDIR/include/node/node_api.h" ] || NODEDIR=/usr
LIBASAN=$(${CC:-gcc} -print-file-name=libasan.so)
[ -f "$LIBASAN" ] || { echo "test:asan: libasan.so not found (install gcc's libasan)" >&2; exit 1; }

mkdir -p "$OUT/native"
# Mirror native/ (remove files deleted from the source tree; cp -p keeps mtimes for make).
for f in "$OUT"/native/*; do [ -e "$f" ] && [ ! -e "native/$(basename "$f")" ] && rm -f "$f"; done
cp -p native/* "$OUT/native/"
# The copied binding.gyp: node-addon-api resolved here (the copy is outside the package), -O1 -g for
# readable traces, the sanitizers on compile and link.
node - "$OUT/binding.gyp.new" <<'EOF'
const fs = require('fs');
const gyp = JSON.parse(fs.readFileSync('binding.gyp', 'utf8'));
const t = gyp.targets[0];
t.include_dirs = t.include_dirs.map((d) => (d.includes('node-addon-api') ? require('path').resolve(require('node-addon-api').include_dir) : d));
const san = ['-fsanitize=address,undefined,float-cast-overflow', '-fno-omit-frame-pointer', '-fno-sanitize-recover=undefined'];
t.cflags_cc = [...t.cflags_cc.filter((f) => !/^-O/.test(f)), '-O1', '-g', ...san];
t.cflags = [...(t.cflags || []), '-O1', '-g', ...san];
t.ldflags = [...(t.ldflags || []), '-fsanitize=address,undefined,float-cast-overflow'];
fs.writeFileSync(process.argv[2], JSON.stringify(gyp, null, 2));
EOF
if ! cmp -s "$OUT/binding.gyp.new" "$OUT/binding.gyp"; then mv "$OUT/binding.gyp.new" "$OUT/binding.gyp"; else rm "$OUT/binding.gyp.new"; fi
SOURCES=$(cd "$OUT" && ls native/*.cc | md5sum)
if [ ! -f "$OUT/build/Makefile" ] || [ "$OUT/binding.gyp" -nt "$OUT/build/Makefile" ] || [ "$SOURCES" != "$(cat "$OUT/build/.sources" 2>/dev/null)" ]; then
  (cd "$OUT" && node "$GYP" configure --release --nodedir="$NODEDIR" >"$OUT/configure.log" 2>&1) || { cat "$OUT/configure.log" >&2; exit 1; }
  echo "$SOURCES" > "$OUT/build/.sources"
fi
(cd "$OUT" && node "$GYP" build --release --nodedir="$NODEDIR" -j "$(nproc)" >"$OUT/build.log" 2>&1) || {
  grep -E 'error|Error' "$OUT/build.log" >&2 || cat "$OUT/build.log" >&2
  echo "test:asan: the sanitizer build failed (log: $OUT/build.log)" >&2
  exit 1
}
ADDON="$OUT/build/Release/sublinear.node"
# Not `grep -q`: it stops reading at the first match, and under pipefail ldd killed by SIGPIPE fails the check.
ldd "$ADDON" | grep libasan >/dev/null || { echo "test:asan: $ADDON is not linked against libasan" >&2; exit 1; }
echo "test:asan: built $ADDON"

# Workers run from dist/: compile the TypeScript first (SUBLINEAR_ASAN_NO_TSC=1: dist/ is known to be fresh,
# e.g. in CI right after npm test).
if [ -z "${SUBLINEAR_ASAN_NO_TSC:-}" ]; then
  npx tsc -p tsconfig.json || echo "test:asan: tsc reported errors; testing what it emitted" >&2
fi
# Default: everything that runs native code in-process, plus the CLI training runs (child processes
# inherit LD_PRELOAD and SUBLINEAR_ADDON, so the sanitized addon trains there too).
EXEC=0
if [ "${1:-}" = "--exec" ]; then EXEC=1; shift; [ "$#" -gt 0 ] || { echo "test:asan: --exec needs a command" >&2; exit 2; }; fi
[ "$#" -gt 0 ] || set -- test/lsh test/network test/train test/native test/cli/train-checkpoint.test.ts test/cli/train-faults.test.ts
export SUBLINEAR_ADDON="$ADDON"
export LD_PRELOAD="$LIBASAN"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:print_summary=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# Make sure the sanitized addon is the one a process loads (and that it loads at all under LD_PRELOAD).
node --input-type=module -e "
  const { native } = await import('$ROOT/dist/src/native/addon.js');
  native();
  const maps = (await import('node:fs')).readFileSync('/proc/self/maps', 'utf8');
  if (!maps.includes('$ADDON') || !maps.includes('libasan')) { console.error('test:asan: the sanitized addon is not the one loaded'); process.exit(1); }
"
[ "$EXEC" = 1 ] && exec "$@"
exec node "$ROOT/node_modules/vitest/vitest.mjs" run "$@"
