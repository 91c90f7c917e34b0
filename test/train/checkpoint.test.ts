// Checkpoints and resume: a run stopped at a checkpoint and resumed ends bit-identical to an
// uninterrupted run (weights, Adam state, step counters, hash tables, schedule), damaged checkpoints are
// refused and skipped in favour of the previous good one, and misuse fails with exact messages.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Network } from '../../src/network/network.js';
import { synthesize } from '../../src/datasets/index.js';
import {
  checkpointName, listCheckpoints, parseCheckpointEvery, readCheckpoint, type CheckpointInfo,
} from '../../src/train/checkpoint.js';
import type { FitOptions } from '../../src/train/fit.js';
import { readBinFile, writeBinFile } from '../../src/util/binfile.js';
import { fit, resume, resumeInfo } from '../../src/train/fit-network.js';

const root = mkdtempSync(join(tmpdir(), 'sublinear-ckpt-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let dirCount = 0;
const freshDir = () => join(root, `run${dirCount++}`);

const data = synthesize({ shape: 'tiny', points: 1500, seed: 11 });
const other = synthesize({ shape: 'tiny', points: 1500, seed: 12 });
// 1500 points / batch 128 = 12 batches per epoch; rebuilds at 3, 6, 9, 13, 17, ... (first 3, growth 1.15).
const config = () => ({
  inputDim: data.features,
  layers: [{ size: 32 }, { size: data.labels, sampling: { hash: 'dwta' as const, K: 3, L: 8, budget: 16 } }],
  seed: 4,
});
const base: FitOptions = { epochs: 3, workers: 0, rebuild: { first: 3 }, lr: 2e-3 };

/** Every piece of training state, as named byte buffers. */
function state(net: Network): Map<string, Buffer> {
  const m = new Map<string, Buffer>();
  const put = (name: string, a: ArrayBufferView) => m.set(name, Buffer.from(a.buffer, a.byteOffset, a.byteLength));
  net.spec.layers.forEach((l, i) => {
    for (const k of ['weights', 'bias', 'mWeights', 'vWeights', 'mBias', 'vBias', 'rowSteps', 'biasSteps'] as const) put(`layer${i}.${k}`, l[k]);
    const t = l.sampling?.tables;
    if (t) for (const k of ['offsets', 'fill', 'seen', 'ids', 'keys'] as const) put(`layer${i}.tables.${k}`, t[k]);
  });
  m.set('counters', Buffer.from(JSON.stringify({ b: net.batchesDone, r: net.rebuildRound, s: net.schedule?.state() })));
  return m;
}

function expectSameState(a: Network, b: Network): void {
  const sa = state(a), sb = state(b);
  expect([...sb.keys()]).toEqual([...sa.keys()]);
  const differing = [...sa.keys()].filter((k) => !sa.get(k)!.equals(sb.get(k)!));
  expect(differing).toEqual([]);
}

/** Trains with checkpoints every `every` batches and aborts right after the checkpoint at `stopAt`. */
async function trainAndStop(dir: string, every: number, stopAt: number, opts: FitOptions = base): Promise<CheckpointInfo[]> {
  const net = new Network(config());
  const ac = new AbortController();
  const saved: CheckpointInfo[] = [];
  const stats = await fit(net, data, {
    ...opts,
    signal: ac.signal,
    checkpoint: { dir, every, onSaved: (i) => { saved.push(i); if (i.batchesDone === stopAt) ac.abort(); } },
  });
  expect(stats.aborted).toBe(true);
  return saved;
}

let uninterrupted: Network | undefined;
async function reference(): Promise<Network> {
  if (!uninterrupted) {
    uninterrupted = new Network(config());
    await fit(uninterrupted, data, base);
  }
  return uninterrupted;
}

describe('parseCheckpointEvery', () => {
  it('accepts batch counts and durations', () => {
    expect(parseCheckpointEvery(500)).toEqual({ batches: 500 });
    expect(parseCheckpointEvery('25')).toEqual({ batches: 25 });
    expect(parseCheckpointEvery('90s')).toEqual({ seconds: 90 });
    expect(parseCheckpointEvery('10m')).toEqual({ seconds: 600 });
    expect(parseCheckpointEvery('1.5h')).toEqual({ seconds: 5400 });
    expect(parseCheckpointEvery(undefined)).toEqual({ seconds: 600 });
  });
  it.each([0, -3, 2.5, '0', '10x', 'm', '0s', ''])('refuses %j', (v) => {
    expect(() => parseCheckpointEvery(v as never)).toThrow(
      `Expected a number of batches (e.g. 500) or a duration (e.g. 90s, 10m, 1h) for checkpoint every but received ${JSON.stringify(v)}`,
    );
  });
});

describe('resume is bit-identical to an uninterrupted run (one thread)', () => {
  // Stop points: mid-epoch right after a rebuild (8: rebuild at 6, tables not from batch-8 weights),
  // an epoch boundary (12), and a count where a rebuild is due at the same point (9).
  it.each([
    [4, 8],
    [4, 12],
    [3, 9],
  ])('every %i batches, stopped at batch %i', async (every, stopAt) => {
    const dir = freshDir();
    const saved = await trainAndStop(dir, every, stopAt);
    expect(saved.at(-1)!.batchesDone).toBe(stopAt);
    expect(saved.map((s) => s.reason).every((r) => r === 'periodic')).toBe(true);
    const net = await resume(dir);
    expect(resumeInfo(net)!.position).toEqual({ epoch: Math.floor(stopAt / 12), batch: stopAt % 12, batchesDone: stopAt });
    expect(resumeInfo(net)!.fitOptions).toMatchObject({ epochs: 3, batchSize: 128, lr: 2e-3, rebuild: { first: 3, growth: 1.15, maxInterval: 1000 } });
    // No options: the saved ones apply (epochs 3, lr 2e-3, the rebuild schedule).
    const stats = await fit(net, data, { workers: 0 });
    expect(stats.batches).toBe(36 - stopAt);
    expectSameState(net, await reference());
  });

  it('with one worker thread', async () => {
    const dir = freshDir();
    await trainAndStop(dir, 5, 10, { ...base, workers: 1 });
    const net = await resume(dir);
    await fit(net, data, { workers: 1 });
    expectSameState(net, await reference());
  });

  it('resuming a completed run with more epochs equals a longer run', async () => {
    const dir = freshDir();
    const first = new Network(config());
    const saved: CheckpointInfo[] = [];
    await fit(first, data, { ...base, epochs: 2, checkpoint: { dir, every: 100, onSaved: (i) => void saved.push(i) } });
    expect(saved.map((s) => [s.reason, s.batchesDone, s.epoch, s.batch])).toEqual([['end', 24, 2, 0]]);
    const net = await resume(dir);
    expect(resumeInfo(net)!.reason).toBe('end');
    await fit(net, data, { epochs: 3, workers: 0 });
    expectSameState(net, await reference());
  });

  it('keeps the newest two checkpoints and continues writing after a resume', async () => {
    const dir = freshDir();
    await trainAndStop(dir, 4, 12);
    expect(readdirSync(dir).sort()).toEqual([checkpointName(8), checkpointName(12)]);
    const net = await resume(dir);
    const more: number[] = [];
    await fit(net, data, { workers: 0, checkpoint: { dir, every: 10, onSaved: (i) => void more.push(i.batchesDone) } });
    expect(more).toEqual([20, 30, 36]);
    expect(readdirSync(dir).sort()).toEqual([checkpointName(30), checkpointName(36)]);
    expectSameState(net, await reference());
  });
});

describe('checkpoint timing', () => {
  it('with two workers, checkpoints land exactly on multiples of every and hold their batch counts', async () => {
    const dir = freshDir();
    const net = new Network(config());
    const seen: number[] = [];
    const stats = await fit(net, data, { ...base, workers: 2, checkpoint: { dir, every: 5, keep: 3, onSaved: (i) => void seen.push(i.batchesDone) } });
    expect(seen).toEqual([5, 10, 15, 20, 25, 30, 35, 36]);
    expect(stats.batches).toBe(36);
    // Each file holds the counters of its batch count.
    const last = await readCheckpoint(join(dir, checkpointName(35)), (c) => new Network(c));
    expect(last.meta.position).toEqual({ epoch: 2, batch: 11, batchesDone: 35 });
    expect(readdirSync(dir).sort()).toEqual([checkpointName(30), checkpointName(35), checkpointName(36)]);
  });

  it('durations: a long one only gives the final checkpoint, a tiny one many', async () => {
    const long: string[] = [];
    await fit(new Network(config()), data, { ...base, checkpoint: { dir: freshDir(), every: '1h', onSaved: (i) => void long.push(`${i.reason}@${i.batchesDone}`) } });
    expect(long).toEqual(['end@36']);
    let n = 0;
    await fit(new Network(config()), data, { ...base, checkpoint: { dir: freshDir(), every: '0.000001s', onSaved: () => void n++ } });
    expect(n).toBe(36);
  });
});

describe('damaged checkpoints', () => {
  it('a corrupt newest checkpoint is skipped for the previous good one, with a warning', async () => {
    const dir = freshDir();
    await trainAndStop(dir, 4, 12);
    const newest = join(dir, checkpointName(12));
    const bytes = readFileSync(newest);
    bytes[bytes.length >> 1] ^= 0x40;
    writeFileSync(newest, bytes);
    await expect(readCheckpoint(newest, (c) => new Network(c))).rejects.toThrow(`${newest}: checksum mismatch (file is corrupt or truncated)`);
    const warnings: string[] = [];
    const net = await resume(dir, { onWarning: (m) => warnings.push(m) });
    expect(warnings).toEqual([
      `checkpoint ${newest} is unusable: ${newest}: checksum mismatch (file is corrupt or truncated) (moved to ${newest}.corrupt); ` +
        `falling back to the previous checkpoint ${join(dir, checkpointName(8))}`,
    ]);
    expect(resumeInfo(net)!.file).toBe(join(dir, checkpointName(8)));
    expect(resumeInfo(net)!.skipped.map((s) => s.file)).toEqual([newest]);
    expect(existsSync(newest + '.corrupt')).toBe(true);
    expect((await listCheckpoints(dir)).map((c) => c.batchesDone)).toEqual([8]);
    await fit(net, data, { workers: 0 });
    expectSameState(net, await reference());
  });

  it('a truncated checkpoint is refused with a clear error; with none left, resume fails', async () => {
    const dir = freshDir();
    await trainAndStop(dir, 4, 8);
    const files = (await listCheckpoints(dir)).map((c) => c.file);
    // The smallest size the header admits: the 16-byte prefix, the JSON header padded to 8, the trailer.
    const minSize = files.map((f) => Math.ceil((16 + readFileSync(f).readUInt32LE(12)) / 8) * 8 + 16);
    for (const f of files) truncateSync(f, 1000);
    const warnings: string[] = [];
    await expect(resume(dir, { onWarning: (m) => warnings.push(m) })).rejects.toThrow(
      `${dir}: no usable checkpoint (${files[0]}: ${files[0]}: truncated: `,
    );
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toBe(
      `checkpoint ${files[0]} is unusable: ${files[0]}: truncated: expected at least ${minSize[0]} bytes, found 1000 (moved to ${files[0]}.corrupt); ` +
        `falling back to the previous checkpoint ${files[1]}`,
    );
    expect(warnings[1]).toBe(`checkpoint ${files[1]} is unusable: ${files[1]}: truncated: expected at least ${minSize[1]} bytes, found 1000 (moved to ${files[1]}.corrupt)`);
  });

  it('an empty or missing directory says so', async () => {
    const dir = freshDir();
    await expect(resume(dir)).rejects.toThrow(`${dir}: no such checkpoint directory`);
    await trainAndStop(dir, 4, 4);
    for (const f of await listCheckpoints(dir)) rmSync(f.file);
    await expect(resume(dir)).rejects.toThrow(`${dir}: no checkpoints (ckpt-<batches>.bin files) found`);
  });

  it('a model file is not a checkpoint', async () => {
    const path = join(root, 'model.sl');
    await new Network(config()).save(path);
    await expect(resume(path)).rejects.toThrow(`${path}: expected a checkpoint file but this is a model`);
  });
});

describe('misuse', () => {
  it('a fresh run refuses a directory holding another run\'s checkpoints', async () => {
    const dir = freshDir();
    await trainAndStop(dir, 4, 4);
    const net = new Network(config());
    await expect(fit(net, data, { ...base, checkpoint: { dir, every: 4 } })).rejects.toThrow(
      `checkpoint directory ${dir} already holds checkpoints of another run (newest: ${join(dir, checkpointName(4))}); ` +
        'resume them (sublinear train --resume, Network.resume) or use an empty directory',
    );
  });

  it('resuming on other data, or with another batch size mid-epoch, is refused', async () => {
    const dir = freshDir();
    await trainAndStop(dir, 5, 5);
    const net = await resume(dir);
    const file = join(dir, checkpointName(5));
    await expect(fit(net, other, { workers: 0 })).rejects.toThrow(`The training data is not the data of checkpoint ${file}: it has 1500 points`);
    await expect(fit(net, data, { workers: 0, batchSize: 64 })).rejects.toThrow(
      `Cannot change batchSize from 128 to 64 when resuming mid-epoch (${file} is at batch 5 of epoch 1); resume with batchSize 128`,
    );
    // Still pending after the refusals: the right call resumes.
    const stats = await fit(net, data, { workers: 0 });
    expect(stats.batches).toBe(31);
  });

  it('resuming an older checkpoint file must not write into the directory of its newer successors', async () => {
    const dir = freshDir();
    await trainAndStop(dir, 4, 12);
    const older = await resume(join(dir, checkpointName(8)));
    await expect(fit(older, data, { workers: 0, checkpoint: { dir, every: 4 } })).rejects.toThrow(
      `checkpoint directory ${dir} already holds checkpoints of another run (newest: ${join(dir, checkpointName(12))})`,
    );
    const newest = await resume(join(dir, checkpointName(12)));
    const seen: number[] = [];
    await fit(newest, data, { workers: 0, checkpoint: { dir, every: 12, onSaved: (i) => void seen.push(i.batchesDone) } });
    expect(seen).toEqual([24, 36]);
    expectSameState(newest, await reference());
  });

  it('a checkpoint that cannot be written is warned about and training goes on to the end', async () => {
    const dir = freshDir();
    const net = new Network(config());
    const warnings: string[] = [];
    const stats = await fit(net, data, {
      ...base,
      onWarning: (m) => warnings.push(m),
      checkpoint: {
        dir, every: 4,
        // After the first checkpoint, the directory turns into a file: every later write fails.
        onSaved: () => {
          rmSync(dir, { recursive: true });
          writeFileSync(dir, 'not a directory');
        },
      },
    });
    expect(stats.batches).toBe(36);
    // Periodic ones at 8, 12, ..., 32 (36 is the end of the run), then the final one.
    expect(stats.checkpointFailures!.map((f) => `${f.reason}@${f.file}`)).toEqual([
      ...[8, 12, 16, 20, 24, 28, 32].map((b) => `periodic@${join(dir, checkpointName(b))}`), `end@${join(dir, checkpointName(36))}`,
    ]);
    expect(warnings).toHaveLength(8);
    expect(warnings[0]).toMatch(
      new RegExp(`^cannot write checkpoint ${dir}/ckpt-000000008\\.bin: ENOTDIR: not a directory, open '${dir}/\\.ckpt-000000008\\.bin\\.tmp-\\d+-[0-9a-f]+'\\. Training goes on; `),
    );
    expect(warnings[7]).toMatch(/^cannot write checkpoint .*ckpt-000000036\.bin: ENOTDIR.*\. The final state is not checkpointed; /);
    // Nothing was lost: the weights are those of an uninterrupted run.
    expectSameState(net, await reference());
  });

  it('bad checkpoint options', async () => {
    const net = new Network(config());
    await expect(fit(net, data, { ...base, checkpoint: { dir: freshDir(), every: 'often' } })).rejects.toThrow(
      'Expected a number of batches (e.g. 500) or a duration (e.g. 90s, 10m, 1h) for checkpoint every but received "often"',
    );
    await expect(fit(net, data, { ...base, checkpoint: { dir: freshDir(), keep: 0 } })).rejects.toThrow(
      'Expected positive integer for checkpoint.keep but received 0',
    );
  });

  it('Network.load reads a checkpoint file\'s weights', async () => {
    const dir = freshDir();
    await trainAndStop(dir, 4, 8);
    const a = await Network.load(join(dir, checkpointName(8)));
    const b = await resume(join(dir, checkpointName(8)));
    expect(Buffer.from(a.spec.layers[1]!.weights.buffer).equals(Buffer.from(b.spec.layers[1]!.weights.buffer))).toBe(true);
    expect(a.batchesDone).toBe(8);
  });
});

describe('files written before an option existed', () => {
  /** Rewrites a model or checkpoint file with `sharedFill` and `batchNegatives` removed from its stored config. */
  async function asOldFile(path: string): Promise<void> {
    const f = await readBinFile<{ config: { layers: { sampling?: Record<string, unknown> }[] } }>(path);
    for (const l of f.meta.config.layers) if (l.sampling) { delete l.sampling.sharedFill; delete l.sampling.batchNegatives; }
    await writeBinFile(path, { kind: f.kind, meta: f.meta, sections: f.sections });
  }
  const optionsOf = (n: Network) => {
    const s = n.config.layers[1]!.sampling!;
    return { sharedFill: s.sharedFill, batchNegatives: s.batchNegatives };
  };

  it('resume and load them with the options off (as they were trained), current files with the options kept', async () => {
    const dir = freshDir();
    await trainAndStop(dir, 4, 8);
    const file = join(dir, checkpointName(8));
    const model = join(dir, 'model.sl');
    await (await resume(file)).save(model);
    expect(optionsOf(await resume(file))).toEqual({ sharedFill: true, batchNegatives: true });
    expect(optionsOf(await Network.load(model))).toEqual({ sharedFill: true, batchNegatives: true });
    await asOldFile(file);
    await asOldFile(model);
    expect(optionsOf(await resume(file))).toEqual({ sharedFill: false, batchNegatives: false });
    expect(optionsOf(await Network.load(model))).toEqual({ sharedFill: false, batchNegatives: false });
  });
});
