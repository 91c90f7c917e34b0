#!/usr/bin/env node
// `npm pack` / `npm publish` (prepack): puts this platform's compiled addon into
// prebuilds/<platform>-<arch>/ so that installs on the same platform load it without compiling
// (src/native/addon.ts finds it through node-gyp-build; scripts/install.cjs skips the compiler).
//
// It reuses build/Release/sublinear.node when build-native.cjs stamped it as built from exactly the
// current sources with the portable flags (no SUBLINEAR_MARCH_NATIVE), and compiles afresh otherwise,
// so a stale, -march=native or hand-made build is never shipped. This replaces `prebuildify --napi`,
// which always recompiles (minutes) and makes node-gyp download headers for the newest Node release
// (it passes --target), which fails offline.
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { BUILD_STAMP, RELEASE_ADDON, ROOT, buildOptions, prebuildFile, sourceFingerprint } = require('./addon-files.cjs');

const portable = buildOptions({});
const wanted = sourceFingerprint(portable);
let stamp;
try {
  stamp = JSON.parse(fs.readFileSync(BUILD_STAMP, 'utf8'));
} catch {
  stamp = undefined;
}
if (stamp?.fingerprint === wanted && fs.existsSync(RELEASE_ADDON)) {
  console.error(`sublinear prebuild: reusing ${path.relative(ROOT, RELEASE_ADDON)} (built from the current sources)`);
} else {
  console.error(`sublinear prebuild: ${stamp ? 'build/Release is stale or built with other flags' : 'no stamped build in build/Release'}; compiling`);
  const env = { ...process.env };
  delete env.SUBLINEAR_MARCH_NATIVE;
  const r = spawnSync(process.execPath, [path.join(__dirname, 'build-native.cjs')], { stdio: 'inherit', env });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

const dest = prebuildFile();
// Only this platform's folder: binaries of other platforms put into prebuilds/ (e.g. by a CI matrix) stay.
fs.rmSync(path.dirname(dest), { recursive: true, force: true });
fs.mkdirSync(path.dirname(dest), { recursive: true });
fs.copyFileSync(RELEASE_ADDON, dest);
// The shipped file must load: check it in a fresh process (a crash there must not take this one down).
const check = spawnSync(process.execPath, ['-e', `const a = require(${JSON.stringify(dest)}); if (typeof a.abiVersion !== 'number') throw new Error('no abiVersion export');`], { encoding: 'utf8' });
if (check.status !== 0) {
  console.error(`sublinear prebuild: ${dest} does not load:\n${check.stderr}`);
  process.exit(1);
}
console.error(`sublinear prebuild: wrote ${path.relative(ROOT, dest)}`);
