// `train --distributed --data-parallel` under `mpirun -np 2` on localhost (spawns the compiled CLI; `npm test` builds it):
// replicas identical and equal to one process training the same global batches, rank 0 alone reporting
// and checkpointing, --resume with another number of ranks, and a failing or dying rank ending the job with
// a non-zero exit that names it. Skipped, saying why, where mpirun or the MPI addon is missing (.ci/run
// installs Open MPI; `npm run build:mpi` builds the addon).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { cpSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { assertBuilt, CLI, ROOT } from '../cli/built.js';
import { MPI_ADDON_ENV } from '../../src/train/mpi.js';
import { MPI_ENV, mpiSkipReason } from './mpi-env.js';
import { Network } from '../../src/network/network.js';
import { readBinFile } from '../../src/util/binfile.js';
import { TRAIN_REPORT_FIELDS } from '../../src/job/train-report.js';

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}


// Runs everywhere: without the addon, --distributed says what to install and how to rebuild.
describe('train --distributed without the MPI addon', () => {
  it('fails with exit 1 and says what to install', () => {
    assertBuilt(['src/cli', 'src/train']);
    const r = spawnSync(process.execPath, [CLI, 'train', '--train', 'missing.txt', '--distributed'], {
      cwd: ROOT, encoding: 'utf8', env: { ...process.env, [MPI_ADDON_ENV]: join(tmpdir(), 'no-such-sublinear_mpi.node') },
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('--distributed needs the MPI addon');
    expect(r.stderr).toContain('apt-get install openmpi-bin libopenmpi-dev');
    expect(r.stderr).toContain('npm rebuild sublinear');
  });
});
const reason = mpiSkipReason();

const ENV = MPI_ENV;

type Run = { code: number | null; stdout: string; stderr: string };
function mpirun(np: number, ...args: string[]): Run {
  const r = spawnSync('mpirun', ['-np', String(np), process.execPath, ...args], { cwd: ROOT, env: ENV, encoding: 'utf8', timeout: 180_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}
function single(...args: string[]): Run {
  const r = spawnSync(process.execPath, args, { cwd: ROOT, env: ENV, encoding: 'utf8', timeout: 180_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}
const lastJson = (s: string) => JSON.parse(s.trim().split('\n').at(-1)!);

let dir: string;
let common: string[];
beforeAll(async () => {
  if (reason) return;
  assertBuilt(['src/cli', 'src/train', 'src/network']);
  dir = await mkdtemp(join(tmpdir(), 'sublinear-mpi-'));
  expect(single(CLI, 'data', 'synth', '--shape', 'tiny', '--train', '1200', '--test', '200', '--seed', '5', '--out', dir).code).toBe(0);
  // A sampled output layer: sparse rows of both layers are exchanged, and tables are rebuilt on every rank.
  // Dropout makes every part's seed matter (its masks are drawn from it).
  writeFileSync(join(dir, 'config.json'), JSON.stringify({
    inputDim: 2000, seed: 3,
    layers: [{ size: 32, dropout: 0.3 }, { size: 100, sampling: { hash: 'dwta', K: 3, L: 8, budget: 16, minActive: 24 } }],
  }));
  common = ['--train', join(dir, 'train.txt'), '--test', join(dir, 'test.txt'), '--config', join(dir, 'config.json'), '--batch', '64', '--lr', '0.01'];
}, 60_000);
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe.skipIf(reason !== null)(`train --distributed --data-parallel with 2 ranks on localhost${reason ? ` (skipped: ${reason})` : ''}`, () => {
  it('2 ranks: one JSON line from rank 0, identical replicas, the model of one process splitting each batch in two', () => {
    const two = mpirun(2, CLI, 'train', ...common, '--epochs', '2', '--workers', '1', '--distributed', '--data-parallel', '--json', '--save', join(dir, 'two.sl'));
    expect(two.code, two.stderr).toBe(0);
    const lines = two.stdout.trim().split('\n').filter((l) => l.startsWith('{'));
    expect(lines).toHaveLength(1); // rank 1 prints nothing
    // --json changes stdout only: rank 0 (and no other) still says on stderr what it trains.
    expect(two.stderr.split('\n').filter((l) => l.startsWith('network: '))).toHaveLength(1);
    const s = JSON.parse(lines[0]!);
    // The report of every mode (docs/cli.md): the common fields, and the older names kept as aliases.
    for (const f of TRAIN_REPORT_FIELDS) expect(s, f).toHaveProperty(f);
    expect(s.mode).toBe('replicated');
    expect(s.metrics.p1).toBe(s.p1);
    expect(s.exchange.bytesPerStep).toBe(s.bytesPerStep);
    expect(s.ranks).toBe(2);
    expect(s.bytesPerStep).toBeGreaterThan(0);
    expect(s.exchange.steps).toBe(2 * Math.ceil(1200 / 64));
    expect(s.checksum.mismatches).toBe(0);
    expect(s.checksum.last.identical).toBe(true);
    expect(s.checksum.last.checksums).toHaveLength(2);
    expect(s.checksum.last.checksums[0]).toBe(s.checksum.last.checksums[1]);
    // Rank r's half of a batch is part g = r of the global step: one process with two parts per batch
    // computes the same sums in the same order, so the saved models match byte for byte.
    const one = single(CLI, 'train', ...common, '--epochs', '2', '--workers', '2', '--distributed', '--data-parallel', '--json', '--save', join(dir, 'one.sl'));
    expect(one.code, one.stderr).toBe(0);
    const o = lastJson(one.stdout);
    expect(o.ranks).toBe(1);
    expect(o.p1).toBe(s.p1);
    expect(readFileSync(join(dir, 'two.sl')).equals(readFileSync(join(dir, 'one.sl')))).toBe(true);
    // And it learns like a plain run with the same global batch (not bit-identical: the part seeds differ).
    const plain = lastJson(single(CLI, 'train', ...common, '--epochs', '2', '--workers', '1', '--json').stdout);
    expect(Math.abs(plain.p1 - s.p1)).toBeLessThan(0.1);
    expect(s.p1).toBeGreaterThan(0.2);
  }, 240_000);

  it('4 ranks: rows most ranks touch are summed by the all-reduce; replicas identical, the model of one process up to float order', async () => {
    // A large common shared set (minActive 300 of 1000 outputs, few candidates): the ranks' output rows
    // overlap enough that summing them over their union moves fewer bytes than gathering them.
    const cfg = join(dir, 'config4.json');
    writeFileSync(cfg, JSON.stringify({
      inputDim: 2000, seed: 3,
      layers: [{ size: 32, dropout: 0.3 }, { size: 1000, sampling: { hash: 'dwta', K: 3, L: 8, budget: 4, minActive: 300 } }],
    }));
    const args = ['--train', join(dir, 'train.txt'), '--test', join(dir, 'test.txt'), '--config', cfg, '--batch', '64', '--epochs', '1', '--distributed', '--data-parallel', '--json'];
    const four = mpirun(4, CLI, 'train', ...args, '--workers', '1', '--save', join(dir, 'four.sl'));
    expect(four.code, four.stderr).toBe(0);
    const s = lastJson(four.stdout);
    expect(s.ranks).toBe(4);
    expect(s.exchange.reducedLayersPerStep).toBeGreaterThan(0.5);
    expect(s.checksum.last.identical).toBe(true);
    expect(new Set(s.checksum.last.checksums).size).toBe(1);
    expect(s.checksum.last.checksums).toHaveLength(4);
    const one = single(CLI, 'train', ...args, '--workers', '4', '--save', join(dir, 'four-in-one.sl'));
    expect(one.code, one.stderr).toBe(0);
    // MPI sums the four ranks' rows in its own order: equal up to float rounding, not bit for bit.
    const a = await Network.load(join(dir, 'four.sl')), b = await Network.load(join(dir, 'four-in-one.sl'));
    a.spec.layers.forEach((l, k) => {
      expect(maxAbsDiff(l.weights, b.spec.layers[k]!.weights), `layer ${k} weights`).toBeLessThan(1e-4);
      expect(maxAbsDiff(l.bias, b.spec.layers[k]!.bias), `layer ${k} bias`).toBeLessThan(1e-4);
    });
  }, 240_000);

  it('--train shard-%r.txt: each rank reads its own shard; the model equals training on their concatenation', async () => {
    // Shards of unequal size (500 and 700 points) cut from train.txt, each a complete XC file.
    const lines = readFileSync(join(dir, 'train.txt'), 'utf8').trimEnd().split('\n');
    const [, D, L] = lines[0]!.split(' ');
    const rows = lines.slice(1);
    writeFileSync(join(dir, 'shard-0.txt'), `500 ${D} ${L}\n${rows.slice(0, 500).join('\n')}\n`);
    writeFileSync(join(dir, 'shard-1.txt'), `700 ${D} ${L}\n${rows.slice(500).join('\n')}\n`);
    const args = [...common.slice(2), '--epochs', '2', '--workers', '1', '--distributed', '--data-parallel', '--json'];
    const sharded = mpirun(2, CLI, 'train', '--train', join(dir, 'shard-%r.txt'), ...args, '--save', join(dir, 'sharded.sl'));
    expect(sharded.code, sharded.stderr).toBe(0);
    const whole = mpirun(2, CLI, 'train', ...common.slice(0, 2), ...args, '--save', join(dir, 'whole.sl'));
    expect(whole.code, whole.stderr).toBe(0);
    expect(lastJson(sharded.stdout).samples).toBe(2 * 1200);
    // The same model; the files differ only in the training data's path they record (sublinear info).
    const [a, b] = await Promise.all(['sharded.sl', 'whole.sl'].map((f) => readBinFile<{ training: { data: { file: string } } }>(join(dir, f))));
    expect(a!.meta.training.data.file).toBe(join(dir, 'shard-%r.txt'));
    expect(b!.meta.training.data.file).toBe(join(dir, 'train.txt'));
    expect({ ...a!.meta, training: null }).toEqual({ ...b!.meta, training: null });
    expect(a!.sections).toEqual(b!.sections);
    // A missing shard is named by the rank that lacks it, and ends the job (both ranks lack theirs here:
    // whichever reports first aborts the job, so either may be the one named).
    const missing = mpirun(2, CLI, 'train', '--train', join(dir, 'nope-%r.txt'), ...args);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toMatch(new RegExp(`sublinear: rank [01] of 2: --train ${join(dir, 'nope-')}[01]\\.txt: no such file or directory`));
  }, 240_000);

  it('rank 0 writes the checkpoints; --resume with 1 rank continues to the same model', () => {
    const ck = join(dir, 'ck');
    const a = mpirun(2, CLI, 'train', ...common, '--epochs', '1', '--workers', '1', '--distributed', '--data-parallel', '--json', '--checkpoint', ck, '--checkpoint-every', '7');
    expect(a.code, a.stderr).toBe(0);
    const files = readdirSync(ck).filter((f) => f.endsWith('.bin'));
    expect(files.length).toBeGreaterThan(0);
    const ck1 = join(dir, 'ck1');
    cpSync(ck, ck1, { recursive: true });
    const b = single(CLI, 'train', '--resume', ck1, '--epochs', '2', '--workers', '2', '--distributed', '--data-parallel', '--json', '--save', join(dir, 'resumed1.sl'));
    expect(b.code, b.stderr).toBe(0);
    expect(lastJson(b.stdout).resumedAt).toBe(Math.ceil(1200 / 64));
    const full = mpirun(2, CLI, 'train', ...common, '--epochs', '2', '--workers', '1', '--distributed', '--data-parallel', '--json', '--save', join(dir, 'full.sl'));
    expect(full.code, full.stderr).toBe(0);
    expect(readFileSync(join(dir, 'resumed1.sl')).equals(readFileSync(join(dir, 'full.sl')))).toBe(true);
  }, 240_000);

  it('replicas that differ are detected and repaired from rank 0', () => {
    const r = mpirun(2, join(ROOT, 'test/train/mpi-resync.mjs'));
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines).toHaveLength(1);
    const o = JSON.parse(lines[0]!);
    expect(o.first).toBe(false);
    expect(o.second).toBe(true);
    expect(o.steps).toBe(0);
    expect(o.report.checks).toBe(2);
    expect(o.report.mismatches).toBe(1);
    expect(o.report.last.identical).toBe(true);
  }, 60_000);

  it('a rank that throws ends the job: non-zero exit, the rank named', () => {
    const r = mpirun(2, join(ROOT, 'test/train/mpi-rank-fails.mjs'), 'throw');
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('sublinear: rank 1 of 2: injected failure on this rank');
  }, 60_000);

  it('ranks waiting while rank 0 works alone sleep (idle barrier): rank 1 spends under a tenth of its wait on the CPU', () => {
    // A blocking MPI collective polls for the whole wait (k-fold selection on rank 0 takes seconds): a whole core
    // on an idle machine, and 12-15% of one with sched_yield on this loaded 2-vCPU one; DistributedRun.agree
    // waits at MPI_Ibarrier tested between growing sleeps instead (2% here).
    const r = mpirun(2, join(ROOT, 'test/train/mpi-idle-wait.mjs'));
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { rank: number; got: string; wallMs: number; cpuMs: number });
    const waiter = lines.find((l) => l.rank === 1)!;
    expect(waiter.got).toBe('chosen by rank 0');
    expect(waiter.wallMs).toBeGreaterThan(1000);
    expect(waiter.cpuMs).toBeLessThan(waiter.wallMs / 10);
  }, 60_000);

  it('an invalid idle-barrier sleep is an exception on the rank, not an abort of the job', () => {
    const r = mpirun(2, join(ROOT, 'test/train/mpi-idle-wait.mjs'), 'bad');
    expect(r.code, r.stderr).toBe(0);
    const root = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { rank: number; error: string }).find((l) => l.rank === 0)!;
    expect(root.error).toContain('idleBarrier: maxSleepUs must be in 1..1000000');
  }, 60_000);

  it('a rank that dies ends the job: non-zero exit, mpirun names the rank', () => {
    const r = mpirun(2, join(ROOT, 'test/train/mpi-rank-fails.mjs'), 'kill');
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/process rank 1 .*exited on signal 9/);
  }, 60_000);
});
