#!/usr/bin/env node
// Builds the optional MPI addon (native-mpi/ -> native-mpi/build/Release/sublinear_mpi.node) that
// `sublinear train --distributed` needs, where an MPI compiler wrapper (mpicxx, from Open MPI's
// libopenmpi-dev or MPICH) is found. Never fails the install: without MPI, or when the build fails, it
// prints one line saying what to install and exits 0. `--print include_dirs|cflags|libs` prints the
// wrapper's flags for native-mpi/binding.gyp.
'use strict';
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const { findNodeDir, findNodeGyp } = require('./node-gyp.cjs');

const root = path.join(__dirname, '..');

function wrapper() {
  for (const c of [process.env.MPICXX, 'mpicxx', 'mpic++', 'mpiCC']) {
    if (!c) continue;
    const r = spawnSync(c, ['--showme:compile'], { encoding: 'utf8' });
    if (r.status === 0) return { cmd: c, style: 'openmpi' };
    const m = spawnSync(c, ['-compile_info'], { encoding: 'utf8' }); // MPICH
    if (m.status === 0) return { cmd: c, style: 'mpich' };
  }
  return null;
}

function flags(w) {
  const run = (args) => spawnSync(w.cmd, args, { encoding: 'utf8' }).stdout.trim().split(/\s+/).filter(Boolean);
  let compile, link;
  if (w.style === 'openmpi') {
    compile = run(['--showme:compile']);
    link = run(['--showme:link']);
  } else {
    const c = run(['-compile_info']).slice(1);
    compile = c.filter((f) => f.startsWith('-I') || f.startsWith('-D'));
    link = run(['-link_info']).slice(1).filter((f) => f.startsWith('-L') || f.startsWith('-l') || f.startsWith('-Wl'));
  }
  const includeDirs = compile.filter((f) => f.startsWith('-I')).map((f) => f.slice(2));
  const cflags = compile.filter((f) => !f.startsWith('-I'));
  // The C++ bindings library (-lmpi_cxx) is not needed; an rpath keeps a non-system MPI findable at run time.
  const libs = link.filter((f) => f !== '-lmpi_cxx');
  for (const f of link) if (f.startsWith('-L')) libs.push(`-Wl,-rpath,${f.slice(2)}`);
  return { include_dirs: includeDirs, cflags, libs };
}

const note = (msg) => console.warn(`sublinear: ${msg}`);

if (process.argv[2] === '--print') {
  const w = wrapper();
  if (!w) process.exit(1);
  process.stdout.write(flags(w)[process.argv[3]].join(' ') + '\n');
  process.exit(0);
}

const w = wrapper();
if (!w) {
  note('MPI not found, so `train --distributed` is unavailable (optional). To enable it: apt-get install openmpi-bin libopenmpi-dev (or load your cluster\'s MPI module), then `npm rebuild sublinear` (in a clone: `npm run build:mpi`).');
  process.exit(0);
}
const gyp = findNodeGyp();
if (!gyp) {
  note('cannot find node-gyp to build the MPI addon; `train --distributed` is unavailable.');
  process.exit(0);
}
const args = [gyp, 'rebuild', '--release', '--directory=native-mpi'];
const nodedir = findNodeDir();
if (nodedir) args.push(`--nodedir=${nodedir}`);
const r = spawnSync(process.execPath, args, { cwd: root, stdio: process.env.SUBLINEAR_MPI_VERBOSE ? 'inherit' : 'pipe', encoding: 'utf8' });
if (r.status !== 0) {
  const tail = `${r.stdout ?? ''}${r.stderr ?? ''}`.trim().split('\n').slice(-8).join('\n');
  note(`building the MPI addon with ${w.cmd} failed, so \`train --distributed\` is unavailable (the rest of sublinear is not affected):\n${tail}`);
  process.exit(0);
}
console.log(`sublinear: built the MPI addon (native-mpi/build/Release/sublinear_mpi.node) with ${w.cmd}`);
