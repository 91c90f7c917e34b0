#!/usr/bin/env node
// Builds the native addon with node-gyp against the running Node's own headers, offline.
// npm bundles node-gyp and exposes its path as npm_config_node_gyp; we pass --nodedir so node-gyp
// never tries to download headers (it would fail on machines without network).
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { findNodeDir, findNodeGyp } = require('./node-gyp.cjs');
const { BUILD_STAMP, buildOptions, sourceFingerprint } = require('./addon-files.cjs');

const gyp = findNodeGyp();
if (!gyp) {
  console.error('sublinear: cannot find node-gyp (normally bundled with npm). Install it with `npm i -g node-gyp@10` and run `npm rebuild sublinear`.');
  process.exit(1);
}
const nodedir = findNodeDir();
const args = [gyp, 'rebuild', '--release'];
if (nodedir) args.push(`--nodedir=${nodedir}`);
else console.warn('sublinear: Node headers not found next to the node binary; node-gyp may try to download them.');
if (process.env.SUBLINEAR_MARCH_NATIVE === '1') args.push('--march_native=true');
const options = buildOptions();
// Computed before compiling: the stamp describes the sources this build started from.
const fingerprint = sourceFingerprint(options);
fs.rmSync(BUILD_STAMP, { force: true });
const jobs = process.env.JOBS || '2';
const r = spawnSync(process.execPath, args, {
  stdio: 'inherit',
  cwd: path.join(__dirname, '..'),
  env: { ...process.env, JOBS: jobs },
});
if (r.status !== 0) {
  console.error('sublinear: native build failed. You need python3, make and a C++17 compiler (g++ >= 9 or clang >= 10).');
  process.exit(r.status ?? 1);
}
// Lets scripts/prebuild.cjs (npm pack) reuse this build instead of compiling again.
fs.writeFileSync(BUILD_STAMP, JSON.stringify({ fingerprint, options, node: process.version, builtAt: new Date().toISOString() }, null, 2) + '\n');
