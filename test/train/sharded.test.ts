// Label-sharded training (src/train/sharded.ts, `train --distributed`): the label and feature
// shardings, checkpoints re-sharded without MPI, and under `mpirun` (spawning the compiled CLI and
// test/train/mpi-shard-step.mjs): one sharded step against the unsharded step (dropout on; a middle layer;
// a wide part), 2- and 4-rank runs against one process, checkpoints of 2 ranks resumed under 1 and 4, the
// saved model read by a single process, and a dying rank named. The MPI parts are skipped, saying why, where
// mpirun or the MPI addon is missing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { assertBuilt, CLI, ROOT } from '../cli/built.js';
import { MPI_ENV, mpiSkipReason } from './mpi-env.js';
import {
  allocateRank, buildSliceWide, featureFrequencies, initFeatureRows, initSliceRows, replicatedArrays, shardFeatures, shardLabels, sharedSetSize, sliceConfig,
} from '../../src/train/sharded.js';
import { Network } from '../../src/network/network.js';
import { buildWide } from '../../src/network/wide.js';
import { shareOf } from '../../src/train/shard-merge.js';
import { loadShardedPart, readShardManifest, writeShardCheckpoint, type ShardCheckpointMeta, type ShardPart } from '../../src/train/shard-checkpoint.js';
import { readBinFile, writeBinFile } from '../../src/util/binfile.js';
import { randomData } from '../network/helpers.js';
import { TRAIN_REPORT_FIELDS } from '../../src/job/train-report.js';

describe('shardLabels', () => {
  it('balances the label counts greedily, gives every label one row of one rank, and is deterministic', () => {
    const freq = Uint32Array.from([50, 1, 1, 30, 20, 0, 0, 0, 10, 9, 8, 1]);
    const s = shardLabels(freq, 3);
    expect(s.labelsOf.map((a) => a.length).reduce((a, b) => a + b)).toBe(freq.length);
    for (let j = 0; j < freq.length; j++) expect(s.labelsOf[s.owner[j]!]![s.local[j]!]).toBe(j);
    // 50 | 30 + 10 + ... | 20 + 9 + 8 + ...: loads within the largest count of each other.
    expect(s.load.reduce((a, b) => a + b)).toBe(130);
    expect(Math.max(...s.load) - Math.min(...s.load)).toBeLessThanOrEqual(10);
    // Labels without training points are spread by count, not piled on one rank (here not on rank 2, the
    // least loaded one after the counted labels).
    const zeros = shardLabels(new Uint32Array(10), 4);
    expect(zeros.labelsOf.map((a) => a.length)).toEqual([3, 3, 2, 2]);
    const unseen = shardLabels(Uint32Array.from([9, 5, 3, 0, 0, 0, 0, 0, 0, 0, 0]), 3);
    expect(unseen.load).toEqual([9, 5, 3]);
    expect(unseen.labelsOf.map((a) => a.length)).toEqual([4, 4, 3]);
    expect(shardLabels(freq, 3)).toEqual(s);
    for (const a of s.labelsOf) expect([...a]).toEqual([...a].sort((x, y) => x - y));
  });

  it('refuses more ranks than labels', () => {
    expect(() => shardLabels(new Uint32Array(2), 3)).toThrow('cannot shard 2 labels over 3 ranks');
  });

  it('slices the output layer: its rows only, dense, with the wide part\'s settings; the batch-shared set is one process\'s (minActive, drawn by the ranks together)', () => {
    const global = { inputDim: 10, layers: [{ size: 8 }, { size: 1000, sampling: { hash: 'dwta' as const, minActive: 101 }, wide: { maxPerLabel: 5 } }] };
    expect(sliceConfig(global, 250).layers.at(-1)).toEqual({ size: 250, activation: undefined, wide: { maxPerLabel: 5 } });
    expect(sliceConfig({ inputDim: 10, layers: [{ size: 8 }, { size: 1000 }] }, 250).layers.at(-1)).toEqual({ size: 250, activation: undefined });
    expect(sliceConfig(global, 250).layers[0]).toEqual({ size: 8 });
    expect(sliceConfig(global, 250).inputDim).toBe(10);
    expect(sliceConfig(global, 250, 4).inputDim).toBe(4);
    expect(sharedSetSize(global)).toBe(101);
    expect(sharedSetSize({ inputDim: 10, layers: [{ size: 8 }, { size: 100_000, sampling: {} }] })).toBe(500);
    expect(sharedSetSize({ inputDim: 10, layers: [{ size: 8 }, { size: 10 }] })).toBe(0);
  });
});

describe('shareOf (the points of a chunk each rank probes and merges in sampled prediction)', () => {
  it('covers every point of a chunk exactly once, in rank order, the shares differing by at most one', () => {
    for (const q of [0, 1, 2, 5, 97, 256]) {
      for (const R of [1, 2, 3, 4, 7]) {
        const seen = new Uint8Array(q);
        let next = 0;
        const sizes: number[] = [];
        for (let r = 0; r < R; r++) {
          const [lo, hi] = shareOf(q, R, r);
          expect(lo).toBe(next);
          for (let i = lo; i < hi; i++) seen[i]!++;
          sizes.push(hi - lo);
          next = hi;
        }
        expect(next).toBe(q);
        expect(seen.every((c) => c === 1)).toBe(true);
        expect(Math.max(...sizes) - Math.min(...sizes)).toBeLessThanOrEqual(1);
      }
    }
  });
});

describe('shardFeatures', () => {
  it('balances the nonzero counts greedily, gives every feature one row of one rank, and is deterministic', () => {
    const data = randomData(400, 300, 10, 31, { maxNnz: 12, labelCounts: [1] });
    const freq = featureFrequencies(data as never, 300);
    expect(freq.reduce((a, b) => a + b, 0)).toBe(data.offsets[data.points]);
    for (const R of [2, 3, 4]) {
      const s = shardFeatures(freq, R);
      expect(s.featuresOf.map((a) => a.length).reduce((a, b) => a + b)).toBe(300);
      for (let f = 0; f < 300; f++) expect(s.featuresOf[s.owner[f]!]![s.local[f]!]).toBe(f);
      for (const a of s.featuresOf) expect([...a]).toEqual([...a].sort((x, y) => x - y));
      // Loads within the largest single count of each other (the greedy bound).
      expect(Math.max(...s.load) - Math.min(...s.load)).toBeLessThanOrEqual(Math.max(...freq));
      expect(s.load.reduce((a, b) => a + b)).toBe(data.offsets[data.points]);
      expect(shardFeatures(Uint32Array.from(freq), R)).toEqual(s);
    }
    expect(() => shardFeatures(new Uint32Array(2), 3)).toThrow('cannot shard 2 features over 3 ranks');
    expect(() => featureFrequencies(data as never, 100)).toThrow('Expected feature ids < 100');
  });

  it('a rank\'s layer 0 holds the rows of its features only, initialised as the whole network\'s rows of the same features', () => {
    const global = { inputDim: 50, seed: 4, layers: [{ size: 6 }, { size: 9 }, { size: 20 }] };
    const whole = new Network(global);
    const freq = Uint32Array.from({ length: 50 }, (_, f) => (f * 7) % 11);
    const labels = Uint32Array.from([1, 5, 19]);
    const s = shardFeatures(freq, 3);
    for (let r = 0; r < 3; r++) {
      const spec = allocateRank(global, labels.length, s.featuresOf[r]!.length);
      const l0 = spec.layers[0]!;
      expect(l0.inDim).toBe(s.featuresOf[r]!.length);
      expect(l0.features).toBe(50);
      expect(l0.weights.length).toBe(6 * l0.inDim);
      expect(l0.mWeights.length).toBe(6 * l0.inDim);
      initFeatureRows(global, s.featuresOf[r]!, l0);
      initSliceRows(global, labels, spec.layers.at(-1)!);
      s.featuresOf[r]!.forEach((f, e) => expect([...l0.weights.subarray(e * 6, (e + 1) * 6)]).toEqual([...whole.spec.layers[0]!.weights.subarray(f * 6, (f + 1) * 6)]));
      labels.forEach((j, e) => expect([...spec.layers[2]!.weights.subarray(e * 9, (e + 1) * 9)]).toEqual([...whole.spec.layers[2]!.weights.subarray(j * 9, (j + 1) * 9)]));
      expect([...spec.layers[1]!.weights]).toEqual([...whole.spec.layers[1]!.weights]);
    }
  });
});

describe('sharded checkpoints (no MPI: the ranks\' calls made one after another)', () => {
  const global = { inputDim: 30, seed: 2, layers: [{ size: 8 }, { size: 5 }, { size: 14, wide: { maxPerLabel: 4, init: 2, minShare: 0.2 } }] };
  const data = randomData(60, 30, 14, 224, { maxNnz: 8, labelCounts: [1, 2, 3] });
  const freq = new Uint32Array(14);
  for (const j of data.labelIndices) freq[j]!++;
  const featureFreq = featureFrequencies(data as never, 30);
  const meta: ShardCheckpointMeta = { format: 'sublinear-sharded-checkpoint', config: global, ranks: 2, epoch: 1, batch: 0, batchesDone: 7, trainPoints: 60, settings: {} };
  /** Rank r of R's part with recognisable values: row weights, moments and steps that name their global ids. */
  const partOf = (r: number, R: number): ShardPart => {
    const labels = shardLabels(freq, R).labelsOf[r]!, features = shardFeatures(featureFreq, R).featuresOf[r]!;
    const spec = allocateRank(global, labels.length, features.length);
    buildSliceWide(global, { spec }, labels, data as never);
    const l0 = spec.layers[0]!, out = spec.layers.at(-1)!;
    features.forEach((f, e) => {
      for (let i = 0; i < 8; i++) l0.weights[e * 8 + i] = f + i / 10, l0.mWeights[e * 8 + i] = -f, l0.vWeights[e * 8 + i] = 2 * f;
      l0.rowSteps[e] = 100 + f;
    });
    labels.forEach((j, e) => {
      for (let i = 0; i < 5; i++) out.weights[e * 5 + i] = j + i / 10, out.mWeights[e * 5 + i] = -j;
      out.bias[e] = j;
      out.rowSteps[e] = 200 + j;
    });
    for (const a of Object.values(replicatedArrays(spec))) for (let i = 0; i < a.length; i++) a[i] = i + 1;
    // Adagrad sums that name their pair: 1000 x feature + global label.
    const w = out.wide!;
    for (let f = 0; f < 30; f++) for (let e = w.offsets[f]!; e < w.offsets[f + 1]!; e++) w.accum[e] = 1000 * f + labels[w.labels[e]!]!;
    return { spec, labels, features, labelFreq: freq, featureFreq };
  };
  let tmp = '';
  let ckpt = '';
  let written: ShardCheckpointMeta;
  afterAll(async () => {
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('2 slices written, read back under 1, 3 and 4 ranks: every rank gets exactly its features\' and labels\' rows, wide pairs and Adagrad sums, and the replicated parts', async () => {
    tmp = await mkdtemp(join(tmpdir(), 'sublinear-shard-ckpt-'));
    for (let r = 0; r < 2; r++) await writeShardCheckpoint(tmp, r, partOf(r, 2), meta, () => {});
    ckpt = readdirSync(tmp).filter((n) => n.startsWith('sharded-')).map((n) => join(tmp, n))[0]!;
    written = await readShardManifest(ckpt);
    expect(written.layout).toBe(2);
    const whole = buildWide(data as never, null, 30, 14, 4, 2, 0.2);
    for (const R of [1, 3, 4]) {
      let pairs = 0, rows = 0;
      for (let r = 0; r < R; r++) {
        const part = await loadShardedPart(ckpt, written, r, R);
        const want = partOf(r, R);
        expect(Array.from(part.labels)).toEqual(Array.from(want.labels));
        expect(Array.from(part.features)).toEqual(Array.from(want.features));
        expect(Array.from(part.featureFreq)).toEqual(Array.from(featureFreq));
        for (const k of [0, 1, 2]) {
          for (const a of ['weights', 'bias', 'mWeights', 'vWeights', 'rowSteps', 'biasSteps'] as const) {
            expect(Array.from(part.spec.layers[k]![a]), `layer ${k} ${a} (rank ${r} of ${R})`).toEqual(Array.from(want.spec.layers[k]![a]));
          }
        }
        rows += part.spec.layers[0]!.inDim;
        const w = part.spec.layers.at(-1)!.wide!;
        const got: string[] = [], wantPairs: string[] = [];
        for (let f = 0; f < 30; f++) {
          for (let e = w.offsets[f]!; e < w.offsets[f + 1]!; e++) {
            const j = part.labels[w.labels[e]!]!;
            got.push(`${f},${j},${w.weights[e]}`);
            expect(w.accum[e]).toBe(1000 * f + j);
          }
          for (let e = whole.offsets[f]!; e < whole.offsets[f + 1]!; e++) if (part.labels.includes(whole.labels[e]!)) wantPairs.push(`${f},${whole.labels[e]},${whole.weights[e]}`);
        }
        expect(got).toEqual(wantPairs);
        pairs += w.labels.length;
      }
      expect(pairs).toBe(whole.labels.length);
      expect(rows).toBe(30);
    }
  });

  it('a checkpoint written before layer 0 was sharded (layer 0 whole in shared.bin) is read: each rank takes its features\' rows', async () => {
    const old = join(tmp, 'legacy');
    cpSync(ckpt, old, { recursive: true });
    // shared.bin as it was: layer 0 whole (each row naming its feature), no feature counts; slices without layer 0.
    const sf = await readBinFile(join(old, 'shared.bin'));
    const { featureFreq: _f, ...sections } = sf.sections;
    const W = new Float32Array(30 * 8), steps = new Uint32Array(30);
    for (let f = 0; f < 30; f++) {
      for (let i = 0; i < 8; i++) W[f * 8 + i] = f + i / 10;
      steps[f] = 100 + f;
    }
    const { layout: _l, ...oldMeta } = sf.meta as ShardCheckpointMeta;
    const M = W.map((x) => -Math.floor(x)), V = W.map((x) => 2 * Math.floor(x));
    await writeBinFile(join(old, 'shared.bin'), { kind: 'checkpoint', meta: oldMeta, sections: { ...sections, 'layer0.weights': W, 'layer0.mWeights': M, 'layer0.vWeights': V, 'layer0.rowSteps': steps } });
    for (let r = 0; r < 2; r++) {
      const f = await readBinFile(join(old, `slice-${r}.bin`));
      const { features: _a, 'in.weights': _b, 'in.mWeights': _c, 'in.vWeights': _d, 'in.rowSteps': _e, ...rest } = f.sections;
      await writeBinFile(join(old, `slice-${r}.bin`), { kind: 'checkpoint', meta: f.meta, sections: rest });
    }
    for (const R of [1, 3]) {
      for (let r = 0; r < R; r++) {
        const part = await loadShardedPart(old, oldMeta as ShardCheckpointMeta, r, R, { featureFreq });
        const want = partOf(r, R);
        expect(Array.from(part.features)).toEqual(Array.from(want.features));
        for (const a of ['weights', 'mWeights', 'vWeights', 'rowSteps', 'bias'] as const) expect(Array.from(part.spec.layers[0]![a])).toEqual(Array.from(want.spec.layers[0]![a]));
        expect(Array.from(part.spec.layers.at(-1)!.weights)).toEqual(Array.from(want.spec.layers.at(-1)!.weights));
      }
    }
  });

  it('a damaged or incomplete slice file is refused, naming the file and the problem', async () => {
    const file = join(ckpt, 'slice-1.bin');
    const f = await readBinFile(file);
    const put = (sections: Record<string, unknown>) => writeBinFile(file, { kind: 'checkpoint', meta: f.meta, sections: sections as never });
    const badLabels = (f.sections['wide.labels'] as Uint32Array).slice();
    badLabels[0] = 99;
    await put({ ...f.sections, 'wide.labels': badLabels });
    await expect(loadShardedPart(ckpt, written, 0, 2)).rejects.toThrow(`${file}: wide.labels[0] = 99 is not a label id (< 14)`);
    const { ['wide.accum']: _, ...rest } = f.sections;
    await put(rest);
    await expect(loadShardedPart(ckpt, written, 0, 2)).rejects.toThrow(`${file}: no wide part (wide.offsets, wide.labels, wide.weights, wide.accum), but the network has one`);
    const feats = (f.sections.features as Uint32Array).slice();
    feats[0] = 31;
    await put({ ...f.sections, features: feats });
    await expect(loadShardedPart(ckpt, written, 0, 2)).rejects.toThrow(`${file}: feature 31 is >= the network's 30 input features`);
    const other = (await readBinFile(join(ckpt, 'slice-0.bin'))).sections.features as Uint32Array;
    feats[0] = other[0]!;
    await put({ ...f.sections, features: feats });
    await expect(loadShardedPart(ckpt, written, 0, 2)).rejects.toThrow(`${file}: feature ${other[0]} is held by two slices`);
    await put({ ...f.sections, 'in.weights': (f.sections['in.weights'] as Float32Array).subarray(8) });
    await expect(loadShardedPart(ckpt, written, 0, 2)).rejects.toThrow(`${file}: in.weights has`);
    const { ['in.rowSteps']: _r, ...noSteps } = f.sections;
    await put(noSteps);
    await expect(loadShardedPart(ckpt, written, 0, 2)).rejects.toThrow(`${file}: no in.rowSteps section`);
    // A torn file (its checksum) is named too.
    await put(f.sections);
    const bytes = readFileSync(file);
    bytes[bytes.length - 40] ^= 0xff;
    writeFileSync(file, bytes);
    await expect(loadShardedPart(ckpt, written, 0, 2)).rejects.toThrow(file);
  });
});

describe('train --distributed (label-sharded) usage', () => {
  it('needs --distributed and one worker per rank', () => {
    assertBuilt(['src/cli', 'src/train']);
    const run = (...a: string[]) => spawnSync(process.execPath, [CLI, 'train', ...a], { cwd: ROOT, encoding: 'utf8' });
    const a = run('--train', 'x.txt', '--shard-labels');
    expect(a.status).toBe(2);
    expect(a.stderr).toContain('--shard-labels needs --distributed');
    if (mpiSkipReason() !== null) return; // the rest starts MPI (a singleton: no mpirun needed)
    const b = run('--train', 'x.txt', '--distributed', '--workers', '2');
    expect(b.status).toBe(2);
    expect(b.stderr).toContain('--distributed runs one training thread per rank: give --workers 1 (or leave it out) and more ranks instead');
    const c = run('--train', 'x.txt', '--distributed', '--data-parallel', '--shard-labels');
    expect(c.status).toBe(2);
    expect(c.stderr).toContain('--data-parallel and --shard-labels are two different modes');
  }, 60_000);
});

const reason = mpiSkipReason();

const ENV = MPI_ENV;
type Run = { code: number | null; stdout: string; stderr: string };
function mpirun(np: number, ...args: string[]): Run {
  const r = spawnSync('mpirun', ['-np', String(np), process.execPath, ...args], { cwd: ROOT, env: ENV, encoding: 'utf8', timeout: 240_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}
function single(...args: string[]): Run {
  const r = spawnSync(process.execPath, args, { cwd: ROOT, env: ENV, encoding: 'utf8', timeout: 240_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}
const lastJson = (s: string) => JSON.parse(s.trim().split('\n').at(-1)!);

/** A line of test/train/mpi-shard-step.mjs (one rank). */
type StepLine = {
  labels: number; features: number; dHDiff: number; layer0Diff: number; replicatedDiff: number; outDiff: number; stepsDiff: number; loss: number; refLoss: number;
  wideDiff: number; accumDiff: number; widePairs: number; wideMoved: number; checksums: string[]; bytesPerStep: number; bytesWant: number;
};

/** One sharded step under np ranks against the unsharded step (test/train/mpi-shard-step.mjs with args): the checks of every variant; the ranks' lines. */
function checkStep(np: number, ...args: string[]): StepLine[] {
  const r = mpirun(np, join(ROOT, 'test/train/mpi-shard-step.mjs'), ...args);
  expect(r.code, r.stderr).toBe(0);
  const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as StepLine);
  expect(lines).toHaveLength(np);
  expect(lines.map((l) => l.labels).reduce((a, b) => a + b)).toBe(11);
  expect(lines.map((l) => l.features).reduce((a, b) => a + b)).toBe(40);
  for (const l of lines) {
    expect(l.dHDiff).toBeLessThan(1e-5);
    // Layer 0 gathered from every rank's feature slice, the replicated parts and this rank's output rows: the
    // unsharded step's, up to float rounding (the pre-activations are summed in another order).
    expect(l.layer0Diff).toBeLessThan(1e-6);
    expect(l.replicatedDiff).toBeLessThan(1e-6);
    expect(l.outDiff).toBeLessThan(1e-6);
    expect(l.stepsDiff).toBe(0);
    expect(Math.abs(l.loss - l.refLoss)).toBeLessThan(1e-4 * Math.abs(l.refLoss));
    // Every rank's replicated parts are bit-identical.
    expect(l.checksums).toHaveLength(np);
    expect(new Set(l.checksums).size).toBe(1);
    expect(l.checksums).toEqual(lines[0]!.checksums);
    // The exchange: the Z and dH all-reduces and 24 bytes per sample, nothing else.
    expect(l.bytesPerStep).toBeCloseTo(l.bytesWant, 6);
  }
  return lines;
}

/** predict --distributed of checkpoint `ck` under 3 ranks gives one process's predict of `model`: labels, and scores up to rounding. */
function expectSamePredictions(model: string, ck: string): void {
  const pd = mpirun(3, CLI, 'predict', '--model', ck, '--input', join(dir, 'test.txt'), '--k', '3', '--distributed');
  const p1 = single(CLI, 'predict', '--model', model, '--input', join(dir, 'test.txt'), '--k', '3');
  expect(pd.code, pd.stderr).toBe(0);
  expect(p1.code, p1.stderr).toBe(0);
  const rows = (t: string) => t.trim().split('\n').slice(1).map((l) => l.split(' ').map((x) => x.split(':').map(Number)));
  const a = rows(p1.stdout), b = rows(pd.stdout);
  expect(b).toHaveLength(400);
  expect(b.map((r) => r.map((x) => x[0]))).toEqual(a.map((r) => r.map((x) => x[0])));
  for (let i = 0; i < a.length; i++) for (let e = 0; e < 3; e++) expect(Math.abs(a[i]![e]![1]! - b[i]![e]![1]!)).toBeLessThan(1e-5);
}

let dir: string;
let common: string[];
beforeAll(async () => {
  if (reason) return;
  assertBuilt(['src/cli', 'src/train', 'src/network']);
  dir = await mkdtemp(join(tmpdir(), 'sublinear-shard-'));
  expect(single(CLI, 'data', 'synth', '--shape', 'tiny', '--train', '1500', '--test', '400', '--seed', '5', '--out', dir).code).toBe(0);
  // A dense output layer (every label scored: one process and the shards compute the same softmax).
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ inputDim: 2000, seed: 3, layers: [{ size: 32 }, { size: 100 }] }));
  common = ['--train', join(dir, 'train.txt'), '--test', join(dir, 'test.txt'), '--config', join(dir, 'config.json'), '--batch', '64', '--lr', '0.003'];
}, 60_000);
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe.skipIf(reason !== null)(`train --distributed (label-sharded) under mpirun${reason ? ` (skipped: ${reason})` : ''}`, () => {
  it('one sharded step equals the unsharded step with dropout on (2 and 4 ranks; with a middle layer too); dL/dH summed over the shards matches a TypeScript reference', () => {
    for (const np of [2, 4]) checkStep(np);
    for (const np of [2, 4]) checkStep(np, 'deep');
  }, 120_000);

  it('with a wide part: one sharded step equals the unsharded step under 1, 2 and 4 ranks (wide weights and Adagrad sums included; its terms read label by label, or scanned)', () => {
    for (const [np, how] of [[1, 'wide'], [2, 'wide'], [4, 'wide'], [2, 'scan']] as const) {
      const lines = checkStep(np, 'wide', how);
      expect(lines.map((l) => l.widePairs).reduce((a: number, b: number) => a + b)).toBeGreaterThan(30);
      for (const l of lines) {
        expect(Math.abs(l.loss - l.refLoss)).toBeLessThan(1e-6 * Math.abs(l.refLoss));
        expect(l.wideMoved).toBeGreaterThan(1e-3);
        expect(l.wideDiff).toBeLessThan(1e-6);
        expect(l.accumDiff).toBeLessThan(1e-4 * l.wideMoved);
      }
    }
  }, 120_000);

  it('sampled prediction merged from 1, 2 and 3 ranks is one process\'s on every rank: top-32 and probabilities at 3 logit scales, with a strong wide part whose proposals (each rank\'s best, merged) reach the top-k; each rank probes and merges a share of every chunk', () => {
    const small = join(dir, 'small');
    expect(single(CLI, 'data', 'synth', '--shape', 'small', '--train', '3000', '--test', '500', '--seed', '3', '--out', small).code).toBe(0);
    // chunk=97: chunks whose points split unevenly between the ranks (each probes and merges a share), a last short one.
    for (const [np, args] of [[1, ['k=32', 'widegain=10']], [2, ['k=32', 'widegain=10']], [3, ['k=32', 'widegain=10', 'chunk=97']], [2, ['k=5', 'chunk=97']], [2, ['nowide']]] as const) {
      const r = mpirun(np, join(ROOT, 'test/train/mpi-shard-predict.mjs'), small, ...args);
      expect(r.code, r.stderr).toBe(0);
      const line = lastJson(r.stdout) as { ranks: number; sampled: { same: number; maxProb: number }[]; exact: { same: number; maxProb: number }[]; scoredShard: number; scoredOne: number };
      expect(line.ranks).toBe(np);
      for (const w of [...line.sampled, ...line.exact]) {
        expect(w.same).toBe(1);
        expect(w.maxProb).toBeLessThan(1e-4);
      }
      // The wide part's kept proposals counted as one process counts them.
      expect(line.scoredShard).toBeCloseTo(line.scoredOne, 6);
    }
  }, 120_000);

  it('with a wide part: 2 ranks reach one process\'s accuracy, the gathered model scores as the shards do, checkpoints re-shard it under 3 ranks', async () => {
    const cfg = join(dir, 'config-wide.json');
    writeFileSync(cfg, JSON.stringify({ inputDim: 2000, seed: 3, layers: [{ size: 32 }, { size: 100, wide: { maxPerLabel: 16, init: 4, lr: 0.1 } }] }));
    const args = ['--train', join(dir, 'train.txt'), '--test', join(dir, 'test.txt'), '--config', cfg, '--batch', '64', '--lr', '0.003'];
    const one = single(CLI, 'train', ...args, '--epochs', '3', '--workers', '1', '--json');
    expect(one.code, one.stderr).toBe(0);
    // --shard-labels: kept for older scripts (label-sharded is what --distributed does).
    const r = mpirun(2, CLI, 'train', ...args, '--epochs', '3', '--distributed', '--shard-labels', '--json', '--save', join(dir, 'w2.sl'));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).not.toContain('without its default wide part');
    const j = lastJson(r.stdout);
    // The report of every mode (docs/cli.md): the common fields, and the older names kept as aliases.
    for (const f of TRAIN_REPORT_FIELDS) expect(j, f).toHaveProperty(f);
    expect(j.mode).toBe('sharded');
    expect(j.model).toBe(join(dir, 'w2.sl'));
    expect(Math.abs(j.metrics.p1 - lastJson(one.stdout).p1)).toBeLessThanOrEqual(0.01);
    const pairs = j.perRank.widePairs.reduce((a: number, b: number) => a + b);
    expect(j.perRank.widePairs).toHaveLength(2);
    expect(Math.min(...j.perRank.widePairs)).toBeGreaterThan(0);
    // The gathered model holds every rank's pairs and scores exactly what the shards scored.
    const net = await Network.load(join(dir, 'w2.sl'));
    expect(net.spec.layers.at(-1)!.wide!.labels.length).toBe(pairs);
    const e = single(CLI, 'eval', '--model', join(dir, 'w2.sl'), '--test', join(dir, 'test.txt'), '--json');
    expect(e.code, e.stderr).toBe(0);
    for (const k of ['p1', 'p3', 'p5', 'ndcg5']) expect(lastJson(e.stdout)[k]).toBeCloseTo(j.metrics[k], 6);
    // A 2-rank checkpoint read by 3 ranks (each collects its labels' pairs from the old slices): the 2-rank
    // run's own scores; resumed under 3 ranks for a third epoch, the 3-epoch run's accuracy.
    const ck = join(dir, 'ck-wide');
    const a = mpirun(2, CLI, 'train', ...args, '--epochs', '2', '--distributed', '--json', '--checkpoint', ck, '--save', join(dir, 'wa.sl'));
    expect(a.code, a.stderr).toBe(0);
    const d = mpirun(3, CLI, 'eval', '--model', ck, '--test', join(dir, 'test.txt'), '--distributed', '--json');
    expect(d.code, d.stderr).toBe(0);
    for (const k of ['p1', 'p3', 'p5']) expect(lastJson(d.stdout)[k]).toBeCloseTo(lastJson(a.stdout).metrics[k], 6);
    // predict --distributed of the checkpoint under 3 ranks: one process's predict of the 2-rank run's saved
    // model (labels, and scores up to rounding).
    expectSamePredictions(join(dir, 'wa.sl'), ck);
    const res = mpirun(3, CLI, 'train', '--resume', ck, '--epochs', '3', '--distributed', '--json', '--save', join(dir, 'w3.sl'));
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).toContain('written by 2 rank(s), now 3');
    const rj = lastJson(res.stdout);
    expect(Math.abs(rj.metrics.p1 - j.metrics.p1)).toBeLessThanOrEqual(0.01);
    expect(rj.perRank.widePairs.reduce((x: number, y: number) => x + y)).toBe(pairs);
  }, 240_000);

  it('refuses the wide part\'s hard negatives (not sharded)', () => {
    const cfg = join(dir, 'config-neg.json');
    writeFileSync(cfg, JSON.stringify({ inputDim: 2000, seed: 3, layers: [{ size: 32 }, { size: 100, wide: { negatives: 4 } }] }));
    const r = mpirun(2, CLI, 'train', '--train', join(dir, 'train.txt'), '--config', cfg, '--epochs', '1', '--distributed');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${cfg}: layers[1].wide.negatives (hard negatives from the wide part) are not sharded: set it to 0`);
  }, 60_000);

  it('2 and 4 ranks reach the accuracy of one process; the saved model is an ordinary model file', () => {
    const one = single(CLI, 'train', ...common, '--epochs', '4', '--workers', '1', '--json', '--save', join(dir, 'one.sl'));
    expect(one.code, one.stderr).toBe(0);
    const p1 = lastJson(one.stdout).p1 as number;
    for (const np of [2, 4]) {
      const ck = join(dir, `ck-run-${np}`);
      const r = mpirun(np, CLI, 'train', ...common, '--epochs', '4', '--distributed', '--json', '--save', join(dir, `s${np}.sl`), '--checkpoint', ck);
      expect(r.code, r.stderr).toBe(0);
      const lines = r.stdout.trim().split('\n').filter((l) => l.startsWith('{'));
      expect(lines).toHaveLength(1); // rank 0 alone reports
      const j = JSON.parse(lines[0]!);
      expect(j.ranks).toBe(np);
      expect(j.perRank.labels.reduce((a: number, b: number) => a + b)).toBe(100);
      expect(Math.abs(j.metrics.p1 - p1)).toBeLessThanOrEqual(0.01);
      expect(j.exchange.bytesPerStep).toBeGreaterThan(0);
      // A single process reads the gathered model and scores exactly what the shards scored.
      const e = single(CLI, 'eval', '--model', join(dir, `s${np}.sl`), '--test', join(dir, 'test.txt'), '--json');
      expect(e.code, e.stderr).toBe(0);
      expect(lastJson(e.stdout).p1).toBeCloseTo(j.metrics.p1, 6);
      // eval --distributed reads the checkpoint directory under another number of ranks, each rank its slice.
      const d = mpirun(3, CLI, 'eval', '--model', ck, '--test', join(dir, 'test.txt'), '--distributed', '--json');
      expect(d.code, d.stderr).toBe(0);
      const dj = lastJson(d.stdout);
      expect(dj.ranks).toBe(3);
      expect(dj.p1).toBeCloseTo(j.metrics.p1, 6);
      expect(dj.p5).toBeCloseTo(j.metrics.p5, 6);
      // predict --distributed: the labels of one process's predict of the saved model, the scores up to rounding.
      if (np === 2) {
        expectSamePredictions(join(dir, 's2.sl'), ck);
      }
    }
    const bad = mpirun(2, CLI, 'eval', '--model', join(dir, 's2.sl'), '--test', join(dir, 'test.txt'), '--distributed');
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('not a directory of sharded checkpoints');
  }, 240_000);

  it('a checkpoint of 2 ranks resumes under 1 and under 4 ranks to the uninterrupted run; unfinished checkpoints are ignored', () => {
    const ck = join(dir, 'ck');
    const a = mpirun(2, CLI, 'train', ...common, '--epochs', '2', '--distributed', '--checkpoint', ck, '--checkpoint-every', '9');
    expect(a.code, a.stderr).toBe(0);
    const full = mpirun(2, CLI, 'train', ...common, '--epochs', '3', '--distributed', '--json');
    expect(full.code, full.stderr).toBe(0);
    const want = lastJson(full.stdout).metrics.p1 as number;
    const wantLoss = lastJson(full.stdout).history.at(-1).loss as number;
    const done = readdirSync(ck).filter((n) => n.startsWith('sharded-')).sort();
    expect(done.length).toBeGreaterThanOrEqual(1);
    expect(done.length).toBeLessThanOrEqual(2);
    for (const np of [1, 4]) {
      const c = join(dir, `ck-${np}`);
      cpSync(ck, c, { recursive: true });
      // A checkpoint whose manifest was never written (a job killed while writing) is skipped.
      mkdirSync(join(c, 'sharded-9999999999'));
      writeFileSync(join(c, 'sharded-9999999999', 'slice-0.bin'), 'torn');
      const r = mpirun(np, CLI, 'train', '--resume', c, '--epochs', '3', '--distributed', '--json');
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toContain(`written by 2 rank(s), now ${np}`);
      const j = lastJson(r.stdout);
      expect(j.ranks).toBe(np);
      expect(Math.abs(j.metrics.p1 - want)).toBeLessThanOrEqual(0.01);
      // The third epoch continues the uninterrupted run's: its loss up to float rounding (the shards sum in
      // another order under another number of ranks).
      expect(j.history.map((h: { epoch: number }) => h.epoch)).toEqual([3]);
      expect(Math.abs(j.history[0].loss - wantLoss)).toBeLessThan(1e-4 * wantLoss);
      // The resumed run checkpoints into the directory it resumed from; the torn one is removed.
      const names = readdirSync(c);
      expect(names).not.toContain('sharded-9999999999');
    }
    // A plain --resume of a sharded checkpoint says how to resume it.
    const plain = single(CLI, 'train', '--resume', ck, '--epochs', '3');
    expect(plain.code).toBe(2);
    expect(plain.stderr).toContain('holds label-sharded checkpoints: resume them with --distributed (in one process too');
  }, 240_000);

  it('with no other flag, --distributed trains what one process trains: the same held-out epochs, blend and re-ranker weight, the calibration, P@k within 0.005; the model file loads in one process', () => {
    // 2,400 points: a held-out slice of 120 (at least minHoldout), so the defaults choose the epochs on it.
    const d = join(dir, 'defaults');
    expect(single(CLI, 'data', 'synth', '--shape', 'tiny', '--train', '2400', '--test', '400', '--seed', '5', '--out', d).code).toBe(0);
    // The defaults rule's network (dense output: no wide part), and a sampled output layer with a wide part as
    // the rule builds from 8,192 labels (the blend is chosen there).
    const wide = join(d, 'wide.json');
    writeFileSync(wide, JSON.stringify({
      inputDim: 2000, seed: 3,
      layers: [{ size: 64 }, { size: 100, activation: 'softmax', sampling: { hash: 'dwta', K: 3, L: 50, logQ: true, budget: 0, minActive: 24 }, wide: { maxPerLabel: 16 }, rerank: {} }],
    }));
    const data = ['--train', join(d, 'train.txt'), '--test', join(d, 'test.txt'), '--seed', '3'];
    for (const [name, extra] of [['defaults', []], ['wide', ['--config', wide]]] as const) {
      const one = single(CLI, 'train', ...data, ...extra, '--workers', '1', '--json', '--save', join(d, `${name}-one.sl`));
      expect(one.code, one.stderr).toBe(0);
      const two = mpirun(2, CLI, 'train', ...data, ...extra, '--distributed', '--json', '--save', join(d, `${name}-two.sl`));
      expect(two.code, two.stderr).toBe(0);
      const a = lastJson(one.stdout), b = lastJson(two.stdout);
      expect(b.mode).toBe('sharded');
      expect(b.ranks).toBe(2);
      for (const f of TRAIN_REPORT_FIELDS) expect(b, f).toHaveProperty(f);
      // The decisions: held-out selection, the epochs run and kept, the blend, the re-ranker's weight.
      expect(b.selection.method).toBe('holdout');
      expect(a.selection.method).toBe('holdout');
      expect(b.validationPoints).toBe(a.validationPoints);
      expect(b.epochs).toBe(a.epochs);
      expect(b.bestEpoch).toBe(a.bestEpoch);
      expect(b.blend?.scale).toBe(a.blend?.scale);
      if (name === 'wide') expect(b.blend.scale).toBeDefined();
      expect(b.rerank.weight).toBe(a.rerank.weight);
      expect(b.rerank.weight).toBeGreaterThan(0);
      // The calibrated probabilities, fitted on the held-out slice from every rank's predictions: one process's
      // up to float rounding.
      expect(b.calibration.points).toBe(a.calibration.points);
      expect(b.calibration.pairs).toBe(a.calibration.pairs);
      expect(Math.abs(b.calibration.threshold - a.calibration.threshold), `${name} threshold`).toBeLessThan(1e-3);
      expect(Math.abs(b.calibration.ece - a.calibration.ece), `${name} ece`).toBeLessThan(1e-3);
      expect(Math.abs(b.testCalibration.ece - a.testCalibration.ece), `${name} test ece`).toBeLessThan(1e-3);
      const val = (j: { history: { validation?: { p1: number } }[] }) => j.history.map((h) => h.validation?.p1);
      expect(val(b)).toHaveLength(val(a).length);
      val(b).forEach((p, i) => expect(Math.abs(p! - val(a)[i]!), `held-out P@1 of epoch ${i + 1}`).toBeLessThanOrEqual(0.005));
      for (const k of ['p1', 'p3', 'p5']) expect(Math.abs(b.metrics[k] - a.metrics[k]), `${name} ${k}`).toBeLessThanOrEqual(0.005);
      // The model file the ranks streamed: one process loads it and scores what the ranks scored.
      const e = single(CLI, 'eval', '--model', join(d, `${name}-two.sl`), '--test', join(d, 'test.txt'), '--json');
      expect(e.code, e.stderr).toBe(0);
      for (const k of ['p1', 'p3', 'p5']) expect(lastJson(e.stdout)[k], `${name} ${k}`).toBeCloseTo(b.metrics[k], 6);
      expect(lastJson(e.stdout).calibration.threshold).toBe(b.calibration.threshold);
    }
  }, 240_000);

  it('a signal stops every rank after the same step with a checkpoint and exit 130/143 (SIGINT to `launch`, SIGTERM to one rank); resume reproduces the uninterrupted run', async () => {
    const d = join(dir, 'signals');
    expect(single(CLI, 'data', 'synth', '--shape', 'tiny', '--train', '2400', '--test', '400', '--seed', '6', '--out', d).code).toBe(0);
    const data = ['--train', join(d, 'train.txt'), '--test', join(d, 'test.txt'), '--seed', '3'];
    const full = mpirun(2, CLI, 'train', ...data, '--distributed', '--json');
    expect(full.code, full.stderr).toBe(0);
    const want = lastJson(full.stdout);
    // Ctrl-C on `sublinear launch` (mpirun alone would kill the ranks and exit 1), and SIGTERM to one rank
    // (mpirun's child: a scheduler's or a user's kill): every rank writes its slice, the job exits 130 / 143.
    const cases = [
      { name: 'int', code: 130, argv: [CLI, 'launch', '-n', '2', '--', 'train', ...data], target: (pid: number) => pid, signal: 'SIGINT' as const },
      {
        name: 'term', code: 143, argv: ['mpirun', '-np', '2', process.execPath, CLI, 'train', ...data, '--distributed'],
        target: (pid: number) => Number(readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).at(-1)), signal: 'SIGTERM' as const,
      },
    ];
    for (const c of cases) {
      const ck = join(d, `ck-${c.name}`);
      const [cmd, ...rest] = c.name === 'int' ? [process.execPath, ...c.argv] : c.argv;
      const child = spawn(cmd!, [...rest, '--checkpoint', ck, '--json'], { cwd: ROOT, env: ENV });
      let stderr = '', sent = false;
      child.stdout.resume();
      const code = await new Promise<number | null>((done) => {
        child.stderr.on('data', (b: Buffer) => {
          stderr += b.toString();
          // After the second epoch's held-out score: mid-training.
          if (!sent && /epoch 2: held-out/.test(stderr)) {
            sent = true;
            process.kill(c.target(child.pid!), c.signal);
          }
        });
        child.on('exit', (x) => done(x));
      });
      expect(sent, stderr).toBe(true);
      expect(code, stderr).toBe(c.code);
      expect(stderr).toMatch(/checkpoint .*sharded-\d+ \(stopped\)/);
      expect(stderr).not.toContain('test: P@1');
      const r = mpirun(2, CLI, 'train', '--resume', ck, '--distributed', '--json');
      expect(r.code, r.stderr).toBe(0);
      const j = lastJson(r.stdout);
      expect(j.resumedAt).toBeGreaterThan(0);
      expect(j.epochs).toBe(want.epochs);
      expect(j.bestEpoch).toBe(want.bestEpoch);
      expect(j.rerank.weight).toBe(want.rerank.weight);
      for (const k of ['p1', 'p3', 'p5']) expect(j.metrics[k], `${c.name} ${k}`).toBeCloseTo(want.metrics[k], 6);
    }
  }, 240_000);

  it('a rank that dies ends the job: non-zero exit, the rank named', () => {
    const r = mpirun(2, join(ROOT, 'test/train/mpi-shard-dies.mjs'));
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/rank 1 .*exited on signal 9/);
  }, 60_000);
});
