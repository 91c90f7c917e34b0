#!/usr/bin/env node
// Cross-compiles the addon for linux-arm64 (glibc) on a linux-x64 machine with Debian's
// g++-aarch64-linux-gnu, and writes prebuilds/linux-arm64/sublinear.napi.glibc.node, next to the
// linux-x64 binary of scripts/prebuild.cjs (`npm pack` ships both).
//
//   npm run prebuild:arm64 [-- --if-possible] [-- --force]
//
// The flags are binding.gyp's (C++17, -O3, the same defines); the Node-API headers are those of the
// running Node (node_api.h and js_native_api.h declare the same C ABI on every architecture; NAPI_VERSION=8
// pins the functions used) and node-addon-api's. No -march: the binary runs on every ARMv8-A CPU, whose
// Advanced SIMD (NEON) is part of the base architecture; native/ picks its kernels at run time
// (SUBLINEAR_BLOCK_ISA=scalar selects the scalar ones, for tests). The build is stamped like the x64 one
// (build/arm64/sublinear.build.json: a hash of the sources, headers, compiler and flags) and reused when
// nothing changed. --if-possible exits 0 with a message when the cross compiler is missing (prepack uses
// it, so that packing works without it; the package then ships whatever prebuilds/linux-arm64 holds);
// otherwise a missing compiler is an error. A failed compilation is always an error. Compiler: $CXX_ARM64,
// else aarch64-linux-gnu-g++ on the PATH; parallel jobs: $JOBS (default: the cores).
'use strict';
const { spawn, spawnSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { ROOT, sourceFingerprint } = require('./addon-files.cjs');
const { findNodeDir } = require('./node-gyp.cjs');

const OUT = path.join(ROOT, 'prebuilds', 'linux-arm64', 'sublinear.napi.glibc.node');
const WORK = path.join(ROOT, 'build', 'arm64');
const STAMP = path.join(WORK, 'sublinear.build.json');
const CXXFLAGS = [
  '-std=c++17', '-O3', '-fno-math-errno', '-fPIC', '-pthread', '-fvisibility=hidden',
  '-Wall', '-Wextra', '-Wno-unused-parameter',
  '-DNAPI_VERSION=8', '-DNAPI_CPP_EXCEPTIONS', '-DNODE_ADDON_API_DISABLE_DEPRECATED', '-DBUILDING_NODE_EXTENSION', '-DNODE_GYP_MODULE_NAME=sublinear',
];
// libstdc++ is linked dynamically, as by node-gyp on x64: the binary then needs glibc >= 2.29 and the
// libstdc++ of GCC >= 11 (GLIBCXX_3.4.29), like the x64 one. Linking it statically would pull in symbols
// of the cross sysroot's glibc 2.36 (arc4random, _dl_find_object).
const LDFLAGS = ['-shared', '-pthread', '-Wl,-z,noexecstack', '-Wl,--as-needed'];

const args = process.argv.slice(2);
const ifPossible = args.includes('--if-possible');
const force = args.includes('--force');

/** Exits with the message: 1, or 0 with --if-possible when `missingTool` (nothing to build with here). */
function fail(message, missingTool = false) {
  console.error(`sublinear prebuild:arm64: ${message}`);
  process.exit(ifPossible && missingTool ? 0 : 1);
}

function readStamp() {
  try {
    return JSON.parse(fs.readFileSync(STAMP, 'utf8'));
  } catch {
    return undefined;
  }
}
const sources = sourceFingerprint({ arch: 'arm64' });

const cxx = process.env.CXX_ARM64 || 'aarch64-linux-gnu-g++';
const version = spawnSync(cxx, ['--version'], { encoding: 'utf8' });
if (version.error || version.status !== 0) {
  // Without the compiler, an existing binary is kept only if it was built from the current sources:
  // a stale one is removed, so that `npm pack` never ships it.
  if (fs.existsSync(OUT) && readStamp()?.sources !== sources) {
    fs.rmSync(OUT, { force: true });
    console.error(`sublinear prebuild:arm64: removed ${path.relative(ROOT, OUT)}: it was not built from the current sources`);
  }
  fail(`the cross compiler ${cxx} was not found${ifPossible ? `; ${fs.existsSync(OUT) ? 'keeping the up-to-date' : 'no'} linux-arm64 binary` : ''} (Debian/Ubuntu: apt-get install g++-aarch64-linux-gnu; or set CXX_ARM64)`, true);
}
const nodeDir = findNodeDir();
if (!nodeDir) fail('the Node-API headers (include/node/node_api.h of the running Node) were not found');
let addonApi;
try {
  addonApi = require(require.resolve('node-addon-api', { paths: [ROOT] })).include_dir.replace(/^"|"$/g, '');
} catch {
  fail('node-addon-api is not installed (run npm install first)');
}
const includes = [`-I${addonApi}`, `-I${path.join(nodeDir, 'include', 'node')}`, `-I${path.join(ROOT, 'native')}`];

const h = crypto.createHash('sha256');
h.update(sources);
h.update(version.stdout.split('\n')[0]);
h.update(JSON.stringify([CXXFLAGS, LDFLAGS]));
for (const f of ['node_api.h', 'js_native_api.h', 'js_native_api_types.h', 'node_api_types.h']) {
  const p = path.join(nodeDir, 'include', 'node', f);
  if (fs.existsSync(p)) h.update(fs.readFileSync(p));
}
const fingerprint = h.digest('hex');

const stamp = readStamp();
if (!force && stamp?.fingerprint === fingerprint && fs.existsSync(OUT) && stamp.sha256 === sha256(OUT)) {
  if (stamp.sources !== sources) fs.writeFileSync(STAMP, JSON.stringify({ ...stamp, sources }, null, 2) + '\n');
  console.error(`sublinear prebuild:arm64: ${path.relative(ROOT, OUT)} is up to date`);
  process.exit(0);
}

function sha256(file) {
  return crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

/** Runs the compiler; resolves with its exit code, its output printed. */
function run(argv) {
  return new Promise((resolve) => {
    const child = spawn(cxx, argv, { stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', (e) => {
      console.error(e.message);
      resolve(1);
    });
    child.on('exit', (code) => resolve(code ?? 1));
  });
}

async function main() {
  fs.mkdirSync(WORK, { recursive: true });
  const sources = fs.readdirSync(path.join(ROOT, 'native')).filter((f) => f.endsWith('.cc')).sort();
  const jobs = Math.max(1, Number(process.env.JOBS) || os.availableParallelism());
  console.error(`sublinear prebuild:arm64: compiling ${sources.length} files with ${cxx} (${jobs} jobs)`);
  const queue = sources.slice();
  const objects = sources.map((f) => path.join(WORK, f.replace(/\.cc$/, '.o')));
  let failed = false;
  await Promise.all(Array.from({ length: jobs }, async () => {
    for (let f = queue.shift(); f !== undefined && !failed; f = queue.shift()) {
      const code = await run([...CXXFLAGS, ...includes, '-c', path.join(ROOT, 'native', f), '-o', path.join(WORK, f.replace(/\.cc$/, '.o'))]);
      if (code !== 0) failed = true;
    }
  }));
  if (failed) fail('compilation failed');
  const tmp = `${OUT}.tmp${process.pid}`;
  fs.mkdirSync(path.dirname(OUT), { recursive: true });
  if ((await run([...LDFLAGS, ...objects, '-o', tmp])) !== 0) fail('linking failed');
  // An AArch64 ELF shared object: e_ident ELF64 little-endian, e_type ET_DYN (3), e_machine EM_AARCH64 (183).
  const head = fs.readFileSync(tmp).subarray(0, 20);
  if (head.readUInt32BE(0) !== 0x7f454c46 || head[4] !== 2 || head[5] !== 1 || head.readUInt16LE(16) !== 3 || head.readUInt16LE(18) !== 183) {
    fs.rmSync(tmp, { force: true });
    fail('the linked file is not an AArch64 ELF shared object');
  }
  fs.renameSync(tmp, OUT);
  fs.writeFileSync(STAMP, JSON.stringify({ fingerprint, sources, sha256: sha256(OUT), compiler: version.stdout.split('\n')[0], builtAt: new Date().toISOString() }, null, 2) + '\n');
  console.error(`sublinear prebuild:arm64: wrote ${path.relative(ROOT, OUT)} (${(fs.statSync(OUT).size / 1024).toFixed(0)} KiB)`);
}

main().catch((e) => fail(e.stack || String(e)));
