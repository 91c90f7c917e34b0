#!/usr/bin/env bash
# Incremental native build for development, serialised by a lock so concurrent builds never clobber build/.
# Usage: scripts/dev-build.sh            (Release build of build/Release/sublinear.node)
set -euo pipefail
cd "$(dirname "$0")/.."
GYP=/usr/lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js
exec 9>/tmp/sublinear-build.lock
flock 9
if [ ! -f build/Makefile ] || [ binding.gyp -nt build/Makefile ] || [ "$(ls native/*.cc | md5sum)" != "$(cat build/.sources 2>/dev/null)" ]; then
  node "$GYP" configure --release --nodedir=/usr >/dev/null
  ls native/*.cc | md5sum > build/.sources
fi
node "$GYP" build --release --nodedir=/usr -j 2 2>&1 | grep -E 'error|warning|Error' || true
test -f build/Release/sublinear.node && echo "built build/Release/sublinear.node"
