#!/usr/bin/env node
// The package's install script. A development checkout (not inside node_modules) always compiles
// native/, since developers edit it. An installed package first tries the prebuilt binary shipped in
// prebuilds/ (linux-x64, glibc): if one matches this platform and loads, there is nothing to compile;
// otherwise (other platforms, musl, a binary that fails to load) it compiles from source.
// SUBLINEAR_BUILD_FROM_SOURCE=1 always compiles. Then the optional MPI addon of `train --distributed` is
// built where an MPI compiler is found (scripts/build-mpi.cjs; it never fails the install).
'use strict';
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const { ROOT } = require('./addon-files.cjs');

/** Builds the optional MPI addon (its own messages; never fails), then exits with `status`. */
function finish(status) {
  if (status === 0) spawnSync(process.execPath, [path.join(__dirname, 'build-mpi.cjs')], { stdio: 'inherit' });
  process.exit(status);
}

function compile(reason) {
  console.error(`sublinear: compiling the native addon (${reason})`);
  const r = spawnSync(process.execPath, [path.join(__dirname, 'build-native.cjs')], { stdio: 'inherit' });
  finish(r.status ?? 1);
}

/** The prebuilt binary node-gyp-build would pick for this platform, ignoring build/; null if none. */
function matchingPrebuild() {
  process.env.PREBUILDS_ONLY = '1'; // read by node-gyp-build when it is first required
  try {
    return require('node-gyp-build').path(ROOT);
  } catch {
    return null;
  }
}

const inNodeModules = path.resolve(ROOT).split(path.sep).includes('node_modules');
if (process.env.SUBLINEAR_BUILD_FROM_SOURCE === '1') compile('SUBLINEAR_BUILD_FROM_SOURCE=1');
if (!inNodeModules) compile('development checkout');
const prebuild = matchingPrebuild();
if (!prebuild) compile(`no prebuilt binary for ${process.platform}-${process.arch}`);
// Load it in a child process: a binary for another libc can crash rather than throw.
const check = spawnSync(process.execPath, ['-e', `const a = require(${JSON.stringify(prebuild)}); if (typeof a.abiVersion !== 'number') throw new Error('no abiVersion export');`], { encoding: 'utf8' });
if (check.status !== 0) {
  compile(`the prebuilt ${path.relative(ROOT, prebuild)} does not load: ${(check.stderr || `exit ${check.status}`).trim().split('\n').pop()}`);
}
console.error(`sublinear: using the prebuilt ${path.relative(ROOT, prebuild)}`);
finish(0);
