// Model selection on small training sets (src/train/early-stop.ts, Network.fit): below minHoldout held-out
// points the epoch count is chosen by k-fold cross-validation and the network then trains on all of the
// data; deterministic for a seed, and a checkpointed run resumes to the same weights whether it was
// stopped during the selection or during the training that follows.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { synthesize } from '../../src/datasets/synth.js';
import { Network } from '../../src/network/network.js';
import { annealMultiplier, bestMeanEpoch, FOLDS_FLAT_EPOCHS, foldsFlat, kfoldRate, slope, kfoldSplit, resolveValidation, selectionMethod, selectionProblem } from '../../src/train/early-stop.js';
import type { FitOptions, FitProgress, FitStats } from '../../src/train/fit.js';
import { defaultTraining, resolveConfig, type NetworkConfig } from '../../src/network/config.js';
import { RERANK_WEIGHTS, rerankScores, rerankTries, rerankWeightSums, trainRerank } from '../../src/network/rerank.js';
import { subset } from '../../src/datasets/split-reader.js';
import type { SparseDataset } from '../../src/datasets/csr.js';
import { compactFeatures, compactInputs, copyOf, fewInputs, fit, resume, resumeInfo } from '../../src/train/fit-network.js';

const root = mkdtempSync(join(tmpdir(), 'sublinear-select-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
const freshDir = () => join(root, `run${dirs++}`);
const weights = (n: Network) => n.spec.layers.map((l) => Buffer.from(l.weights.buffer, l.weights.byteOffset, l.weights.byteLength));

/** The first call trains a network from `config` on `data` with `opts`; every call returns that run. */
function fitOnce(config: NetworkConfig, data: SparseDataset, opts: FitOptions): () => Promise<{ net: Network; stats: FitStats }> {
  let first: Promise<{ net: Network; stats: FitStats }> | undefined;
  return () => (first ??= (async () => {
    const net = new Network(config);
    return { net, stats: await fit(net, data, opts) };
  })());
}

/** A checkpointed run stopped during a selection (k-fold or a held-out copy), and one stopped after it. */
function selectionResumeTests(c: {
  data: SparseDataset; config: NetworkConfig; opts: FitOptions; uninterrupted: () => Promise<{ net: Network; stats: FitStats }>;
  /** Whether a progress report comes from the selection. */
  selecting: (p: FitProgress) => boolean;
  /** What trains after the selection, for the test's name. */
  after: string;
}): void {
  const { data, config, opts, uninterrupted, selecting } = c;
  it('a run stopped during the selection resumes from its start and ends with the same weights', async () => {
    const dir = freshDir();
    const ac = new AbortController();
    const net = new Network(config);
    const stats = await fit(net, data, {
      ...opts, signal: ac.signal, progressEvery: 0, checkpoint: { dir, every: 1 },
      onProgress: (p) => { if (selecting(p) && p.epoch >= 1) ac.abort(); },
    });
    expect(stats.aborted).toBe(true);
    expect(stats.samples).toBe(0);
    expect(stats.stoppedIn).toBe('selection'); // the network is untrained: no model to keep
    const resumed = await resume(dir);
    expect(resumeInfo(resumed)!.position).toEqual({ epoch: 0, batch: 0, batchesDone: 0, phase: 'selection' });
    expect(resumeInfo(resumed)!.reason).toBe('abort');
    const st = await fit(resumed, data, { checkpoint: { dir, every: 1 } });
    const ref = await uninterrupted();
    expect(st.selection).toEqual(ref.stats.selection);
    expect(weights(resumed)).toEqual(weights(ref.net));
  });

  it(`a run stopped during ${c.after} resumes it, without selecting again`, async () => {
    const dir = freshDir();
    const ac = new AbortController();
    const net = new Network(config);
    const ref = await uninterrupted();
    expect(ref.stats.epochs).toBeGreaterThanOrEqual(2);
    let selectionProgress = 0;
    const stats = await fit(net, data, {
      ...opts, signal: ac.signal, checkpoint: { dir, every: 1 },
      onEpochEnd: (epoch) => { if (epoch === 0) ac.abort(); },
    });
    expect(stats.aborted).toBe(true);
    const resumed = await resume(dir);
    expect(resumeInfo(resumed)!.fitOptions).toMatchObject({ epochs: ref.stats.epochs, validation: null, selection: ref.stats.selection });
    const st = await fit(resumed, data, { checkpoint: { dir, every: 1 }, onProgress: (p) => { if (selecting(p)) selectionProgress++; } });
    expect(selectionProgress).toBe(0);
    expect(st.selection).toEqual(ref.stats.selection);
    expect(st.epochs).toBe(ref.stats.epochs);
    expect(weights(resumed)).toEqual(weights(ref.net));
  });
}

describe('kfoldSplit', () => {
  it('is a seeded partition: every row held out exactly once, each fold trains on the others', () => {
    const folds = kfoldSplit(103, 5, 7);
    expect(folds.length).toBe(5);
    const seen = new Uint8Array(103);
    for (const f of folds) {
      expect([20, 21]).toContain(f.holdout.length);
      expect(f.train.length + f.holdout.length).toBe(103);
      for (const r of f.holdout) seen[r]!++;
      const both = new Set([...f.train, ...f.holdout]);
      expect(both.size).toBe(103);
      expect([...f.train]).toEqual([...f.train].sort((a, b) => a - b));
    }
    expect(seen.every((c) => c === 1)).toBe(true);
    expect(kfoldSplit(103, 5, 7).map((f) => [...f.holdout])).toEqual(folds.map((f) => [...f.holdout]));
    expect(kfoldSplit(103, 5, 8).map((f) => [...f.holdout])).not.toEqual(folds.map((f) => [...f.holdout]));
  });
});

describe('selectionMethod', () => {
  const v = resolveValidation({});
  it('uses k-fold while the held-out slice would hold fewer than minHoldout points', () => {
    expect(selectionMethod(1990, v)).toBe('holdout'); // 5% = 99.5 -> 100 points
    expect(selectionMethod(1989, v)).toBe('kfold'); // 99 points
    expect(selectionMethod(300, v)).toBe('kfold');
    expect(selectionMethod(300, resolveValidation({ minHoldout: 1 }))).toBe('holdout');
    expect(selectionMethod(300, resolveValidation({ fraction: 0.5 }))).toBe('holdout');
  });
  it('needs at least two folds of two points', () => {
    expect(selectionMethod(4, v)).toBe('kfold');
    expect(selectionMethod(3, v)).toBe('holdout');
  });
});

describe('bestMeanEpoch', () => {
  it('picks the epoch of the best mean over the folds, the earliest of equal ones', () => {
    expect(bestMeanEpoch([[0.1, 0.5, 0.4], [0.3, 0.3, 0.6]])).toEqual({ epochs: 3, mean: [0.2, 0.4, 0.5] });
    expect(bestMeanEpoch([[0.5, 0.2, 0.5]]).epochs).toBe(1);
  });
});

describe('foldsFlat', () => {
  it('is the least-squares slope', () => {
    expect(slope([1, 2, 3, 4])).toBeCloseTo(1, 12);
    expect(slope([0.5, 0.3, 0.5, 0.3])).toBeCloseTo(-0.04, 12);
    expect(slope([7])).toBe(0);
  });
  // A curve that peaks at epoch 10 (0.5), then is flat (noise around 0.48) or falls.
  const peak = [0.1, 0.2, 0.3, 0.35, 0.4, 0.42, 0.44, 0.46, 0.47, 0.5];
  const flat = [...peak, 0.48, 0.47, 0.49, 0.48, 0.47, 0.48];
  it('stops a flat curve before the descent when a descent begun now would not end by maxEpochs', () => {
    expect(foldsFlat(flat, undefined, 32, 40)).toBe(true); // 16 + 32 > 40
    expect(foldsFlat(flat, undefined, 10, 40)).toBe(false); // a descent of 10 epochs still fits: the stall rule decides
    expect(foldsFlat(flat.slice(0, -1), undefined, 32, 40)).toBe(false); // 5 epochs after the best: too soon to judge
    expect(foldsFlat(flat.slice(0, 10 + FOLDS_FLAT_EPOCHS), undefined, 32, 40)).toBe(true);
  });
  it('before the descent, waits as long as the stall rule after a late best (half the best epoch)', () => {
    const late = [...Array.from({ length: 20 }, (_, i) => 0.3 + i * 0.01), 0.48, 0.47, 0.48, 0.47, 0.46, 0.47, 0.46, 0.46, 0.45, 0.46];
    expect(foldsFlat(late.slice(0, 26), undefined, 32, 40)).toBe(false); // 6 epochs after the best at 20: not yet
    expect(foldsFlat(late, undefined, 32, 40)).toBe(true); // 10
    expect(foldsFlat(late.slice(0, 26), 20, 10, 40)).toBe(true); // in a descent begun at 20, half run: 6 epochs suffice
  });
  it('lets a curve that still rises after its best go on', () => {
    const rising = [...peak, 0.44, 0.45, 0.46, 0.47, 0.48, 0.49, 0.495];
    expect(foldsFlat(rising, undefined, 32, 40)).toBe(false);
    // Fell after its best and climbs again: the recent slope, not the one since the best, decides.
    const recovering = [...peak, 0.49, 0.47, 0.44, 0.42, 0.41, 0.41, 0.42, 0.43, 0.44];
    expect(foldsFlat(recovering, undefined, 32, 40)).toBe(false);
    expect(foldsFlat([...peak, 0.49, 0.48, 0.47, 0.46, 0.45, 0.44, 0.45, 0.44], undefined, 32, 40)).toBe(true);
  });
  it('inside the descent, stops only once it has run half its epochs', () => {
    // The descent began after epoch 12 (annealFrom) and lasts 10 epochs: half of it is done after epoch 17.
    expect(foldsFlat(flat, 12, 10, 50)).toBe(false); // epoch 16: 4 epochs into it
    expect(foldsFlat([...flat, 0.47], 12, 10, 50)).toBe(true); // epoch 17: 5
    expect(foldsFlat([...flat, 0.47], 12, 12, 50)).toBe(false); // 5 of 12
  });
  it('judges from the best mean, the earliest of equal ones', () => {
    // Equal to the best later does not move it: 6 epochs after epoch 10, falling.
    expect(foldsFlat([...peak, 0.5, 0.49, 0.48, 0.47, 0.46, 0.45], undefined, 32, 40)).toBe(true);
    // A new best resets the count.
    expect(foldsFlat([...flat, 0.51], undefined, 32, 40)).toBe(false);
  });
});

describe('kfoldRate', () => {
  it('raises the default rate below KFOLD_RATE_STEPS batches an epoch, at most twice, never lowers it', () => {
    expect(kfoldRate(2e-3, 240, 128)).toBe(4e-3); // 2 batches an epoch: twice
    expect(kfoldRate(2e-3, 128, 128)).toBe(4e-3); // 1: capped at twice
    expect(kfoldRate(2e-3, 300, 128)).toBeCloseTo(2e-3 * 4 / 3, 12); // 3 batches
    expect(kfoldRate(2e-3, 512, 128)).toBe(2e-3); // 4
    expect(kfoldRate(2e-3, 800, 128)).toBe(2e-3); // 7
    expect(kfoldRate(2e-3, 240, 60)).toBe(2e-3); // 4 batches of 60
    expect(kfoldRate(1e-2, 1, 128)).toBe(2e-2);
  });
});

describe('selectionProblem', () => {
  it('accepts the records fit() writes and names what is wrong with others', () => {
    expect(selectionProblem({ method: 'kfold', folds: 5, epochs: 3, scores: [0.1], p1: [0.2], holdoutPoints: 15, reason: 'x' })).toBeNull();
    expect(selectionProblem({ method: 'kfold', folds: 5, epochs: 3, scores: [NaN], p1: [0.2], holdoutPoints: 15, reason: 'x' })).toBe('scores and p1 must be arrays of finite numbers');
    expect(selectionProblem({ method: 'grid', reason: 'x' })).toBe('unknown method "grid"');
    const refit = { method: 'holdout', points: 15, epochs: 2, reason: 'x', refit: { scores: [0.1, 0.2], p1: [0.2, 0.3] } };
    expect(selectionProblem(refit)).toBeNull();
    expect(selectionProblem({ ...refit, rerank: { weight: 2, tried: [] }, blend: { scale: 0.5, points: 15, epoch: 2, tried: [] } })).toBeNull();
    expect(selectionProblem({ ...refit, refit: { scores: [0.1], p1: 'x' } })).toBe('refit scores and p1 must be arrays of finite numbers');
    expect(selectionProblem({ ...refit, blend: { scale: 0, tried: [] } })).toBe('invalid blend');
    expect(selectionProblem({ ...refit, rerank: { weight: -1, tried: [] } })).toBe('invalid rerank');
    expect(selectionProblem({ method: 'holdout', points: 15, epochs: 2, reason: 'x', blend: { scale: 1, tried: [] } })).toBe('rerank, blend, anneal and calibration are recorded only with refit');
    expect(selectionProblem({ ...refit, anneal: { from: 1, epochs: 1 } })).toBeNull();
    expect(selectionProblem({ ...refit, anneal: { from: 1, epochs: 0 } })).toBe('invalid anneal');
    const calibration = { shortlist: 10, weights: [1, -1], bias: 0.5, labels: [3], shifts: [0.2], threshold: 0.3, report: {} };
    expect(selectionProblem({ ...refit, calibration })).toBeNull();
    expect(selectionProblem({ ...refit, calibration: { ...calibration, threshold: 2 } })).toBe('invalid calibration: invalid calibration threshold 2');
    expect(selectionProblem({ method: 'kfold', folds: 5, epochs: 3, scores: [0.1], p1: [0.2], holdoutPoints: 15, reason: 'x', calibration: { ...calibration, labels: [] } }))
      .toBe('invalid calibration: the calibration has different numbers of labels and shifts');
    expect(selectionProblem({ method: 'kfold', folds: 5, epochs: 3, scores: [0.1], p1: [0.2], holdoutPoints: 15, reason: 'x', anneal: { from: 2, epochs: 1 } })).toBeNull();
    expect(selectionProblem({ method: 'kfold', folds: 5, epochs: 3, scores: [0.1], p1: [0.2], holdoutPoints: 15, reason: 'x', anneal: { from: -1, epochs: 1 } })).toBe('invalid anneal');
    expect(selectionProblem({ method: 'kfold', folds: 5, epochs: 3, scores: [0.1], p1: [0.2], holdoutPoints: 15, reason: 'x', lr: 4e-3 })).toBeNull();
    expect(selectionProblem({ method: 'kfold', folds: 5, epochs: 3, scores: [0.1], p1: [0.2], holdoutPoints: 15, reason: 'x', lr: 0 })).toBe('lr must be a positive number');
  });
  it('refitMaxPoints is a non-negative integer, 0 by default', () => {
    expect(resolveValidation({}).refitMaxPoints).toBe(0);
    expect(() => resolveValidation({ refitMaxPoints: -1 })).toThrow('Expected integer >= 0 for validation.refitMaxPoints but received -1');
  });
});

describe('fit on a small training set', () => {
  const data = synthesize({ shape: 'tiny', points: 300, seed: 5 });
  const config = { inputDim: data.features, seed: 3, layers: [{ size: 32, dropout: 0.3 }, { size: data.labels }] };
  const opts: FitOptions = { workers: 0, validation: { maxEpochs: 8, patience: 1 } };

  const uninterrupted = fitOnce(config, data, opts);

  it('chooses the epoch count by 5-fold cross-validation, then trains on all of the points', async () => {
    const { stats } = await uninterrupted();
    const s = stats.selection!;
    expect(s.method).toBe('kfold');
    if (s.method !== 'kfold') return;
    expect(s.folds).toBe(5);
    expect(s.holdoutPoints).toBe(15);
    expect(s.scores.length).toBeGreaterThanOrEqual(s.epochs);
    expect(s.scores.length).toBeLessThanOrEqual(8);
    expect(s.epochs).toBe(bestMeanEpoch([s.scores]).epochs);
    expect(s.reason).toBe(`a held-out slice would hold 15 points (fewer than minHoldout 100): 5-fold cross-validation chose ${s.epochs} epochs, then the network trained on all 300 points`);
    // The refit: that many epochs over every point, no held-out slice, no kept best epoch.
    expect(stats.epochs).toBe(s.epochs);
    expect(stats.samples).toBe(s.epochs * data.points);
    expect(stats.validation).toBeUndefined();
    expect(stats.bestEpoch).toBeUndefined();
    // It learned: the selected epoch's mean held-out P@1 is far above chance (100 labels).
    expect(s.p1[s.epochs - 1]!).toBeGreaterThan(0.3);
  });

  it('trains the folds and then all of the points at the default rate raised for few batches an epoch (kfoldRate)', async () => {
    const { net, stats } = await uninterrupted();
    const s = stats.selection!;
    if (s.method !== 'kfold') throw new Error('expected k-fold selection');
    // 240 points a fold, 2 batches an epoch: twice the default rate.
    const lr = defaultTraining(resolveConfig(config), 1).lr * 2;
    expect(s.lr).toBe(lr);
    // The same weights as a network trained that many epochs on all of the points at that rate (along the folds' descent).
    const fixed = new Network(config);
    const lrSchedule = s.anneal ? (e: number, b: number, bpe: number) => annealMultiplier(s.anneal!.from, s.anneal!.epochs, e, b, bpe) : undefined;
    await fit(fixed, data, { workers: 0, lr, epochs: s.epochs, validation: false, ...(lrSchedule ? { lrSchedule } : {}) });
    expect(weights(net)).toEqual(weights(fixed));
    // A rate given is kept.
    const given = new Network(config);
    const st = await fit(given, data, { ...opts, lr: 1e-3, validation: { maxEpochs: 2 } });
    expect(st.selection!.method === 'kfold' && st.selection!.lr).toBe(1e-3);
  });

  it('is deterministic for a seed', async () => {
    const { net, stats } = await uninterrupted();
    const again = new Network(config);
    const st = await fit(again, data, opts);
    expect(st.selection).toEqual(stats.selection);
    expect(weights(again)).toEqual(weights(net));
  });

  selectionResumeTests({ data, config, opts, uninterrupted, selecting: (p) => p.fold !== undefined, after: 'the training after the selection' });

  it('keeps one held-out slice, early stopping and the best weights when the slice is large enough', async () => {
    const net = new Network(config);
    const stats = await fit(net, data, { workers: 0, validation: { maxEpochs: 3, minHoldout: 15, refitMaxPoints: 0 } });
    expect(stats.selection).toMatchObject({ method: 'holdout', points: 15 });
    expect(stats.selection!.reason).toMatch(/not trained again on all points: refitMaxPoints is 0\)$/);
    expect(stats.validationPoints).toBe(15);
    expect(stats.samples).toBe(stats.epochs * 285);
  });
});

describe('fit up to refitMaxPoints points: held-out selection on a copy, then all of the points', () => {
  const data = synthesize({ shape: 'tiny', points: 300, seed: 5 });
  const config = { inputDim: data.features, seed: 3, layers: [{ size: 32, dropout: 0.3 }, { size: data.labels }] };
  const opts: FitOptions = { workers: 0, lr: 0.003, validation: { schedule: 'plateau', maxEpochs: 6, patience: 2, minHoldout: 15, refitMaxPoints: 20_000 } };

  const uninterrupted = fitOnce(config, data, opts);

  it('chooses the epochs on the held-out slice, then trains that many epochs on every point (as a fixed-epoch run would)', async () => {
    const { net, stats } = await uninterrupted();
    const s = stats.selection!;
    expect(s.method).toBe('holdout');
    if (s.method !== 'holdout') return;
    expect(s.points).toBe(15);
    expect(s.refit!.p1.length).toBe(s.refit!.scores.length);
    expect(s.refit!.scores.length).toBeGreaterThanOrEqual(s.epochs);
    expect(s.reason).toBe(`15 held-out points chose ${s.epochs} epochs on a copy of the network (${s.refit!.scores.length} trained), then the network trained on all 300 points (at most refitMaxPoints 20000)`);
    expect(stats.epochs).toBe(s.epochs);
    expect(stats.samples).toBe(s.epochs * data.points);
    expect(stats.validation).toBeUndefined();
    expect(stats.bestEpoch).toBeUndefined();
    // The same weights as a network trained for that many epochs on all of the points from the start.
    const fixed = new Network(config);
    await fit(fixed, data, { workers: 0, lr: 0.003, epochs: s.epochs, validation: false });
    expect(weights(net)).toEqual(weights(fixed));
  });

  it("under schedule 'anneal' the run on all points descends where the copy did", async () => {
    const net = new Network(config);
    const stats = await fit(net, data, { workers: 0, lr: 0.003, validation: { maxEpochs: 20, minHoldout: 15, refitMaxPoints: 20_000 } });
    const s = stats.selection!;
    expect(s.method).toBe('holdout');
    if (s.method !== 'holdout') return;
    // 285 training points, 3 batches an epoch: a descent of 22 epochs, cut by maxEpochs.
    expect(s.anneal!.epochs).toBe(22);
    expect(s.refit!.scores.length).toBe(Math.min(20, s.anneal!.from + 22));
    expect(stats.epochs).toBe(s.epochs);
    // The same weights as a fixed run of that many epochs on all points along the same curve.
    const fixed = new Network(config);
    await fit(fixed, data, { workers: 0, lr: 0.003, epochs: s.epochs, validation: false, lrSchedule: (e, b, bpe) => annealMultiplier(s.anneal!.from, s.anneal!.epochs, e, b, bpe) });
    expect(weights(net)).toEqual(weights(fixed));
  });

  it('is off at refitMaxPoints 0 and below minHoldout (k-fold selection)', async () => {
    const off = new Network(config);
    const st = await fit(off, data, { ...opts, validation: { ...opts.validation as object, refitMaxPoints: 0 } });
    expect(st.selection).toMatchObject({ method: 'holdout', points: 15 });
    expect(st.selection).not.toHaveProperty('refit');
    expect(st.validationPoints).toBe(15);
    const small = new Network(config);
    expect((await fit(small, data, { ...opts, validation: { maxEpochs: 2 } })).selection!.method).toBe('kfold');
  });

  selectionResumeTests({ data, config, opts, uninterrupted, selecting: (p) => p.selection !== undefined, after: 'the training on all points' });
});

describe('selection copies', () => {
  it('a copy (copyOf: no Glorot draw, then the state copied in) equals its source, trained or not', async () => {
    const data = synthesize({ shape: 'tiny', points: 200, seed: 9 });
    const src = new Network({ inputDim: data.features, seed: 4, layers: [{ size: 16 }, { size: data.labels }] });
    const same = (a: Network, b: Network) => a.spec.layers.every((l, k) => {
      const m = b.spec.layers[k]!;
      return ['weights', 'bias', 'mWeights', 'vWeights', 'mBias', 'vBias', 'rowSteps', 'biasSteps'].every((f) =>
        (l as unknown as Record<string, ArrayLike<number>>)[f]!.length > 0 &&
        Array.from((l as unknown as Record<string, ArrayLike<number>>)[f]!).every((x, i) => Object.is(x, (m as unknown as Record<string, ArrayLike<number>>)[f]![i])));
    });
    const fresh = copyOf(src);
    expect(src.spec.layers[0]!.weights.some((x) => x !== 0)).toBe(true);
    expect(same(fresh, src)).toBe(true);
    await fit(src, data, { epochs: 2, workers: 0 });
    expect(src.spec.layers[0]!.mWeights.some((x) => x !== 0)).toBe(true);
    const trained = copyOf(src);
    expect(same(trained, src)).toBe(true);
    expect(trained.batchesDone).toBe(src.batchesDone);
  });

  it("a copy on the training data's features (compactInputs) trains as a copy of the whole input does, row for row", async () => {
    const data = synthesize({ shape: 'tiny', points: 200, seed: 9 });
    // 37 input features that the training data never holds, plus those of the generator it never drew.
    const src = new Network({ inputDim: data.features + 37, seed: 4, layers: [{ size: 16, dropout: 0.3 }, { size: data.labels }] });
    const inputs = compactInputs(src, data)!;
    expect(inputs.length).toBeLessThanOrEqual(data.features);
    const whole = copyOf(src), compact = copyOf(src, inputs);
    expect(compact.config.inputDim).toBe(inputs.length);
    const small = compactFeatures(data, inputs);
    expect(small.features).toBe(inputs.length);
    const opts: FitOptions = { epochs: 3, workers: 0, threads: 1, validation: false, calibration: false, inputScaling: 'off' };
    await fit(whole, data, opts);
    await fit(compact, small, opts);
    const w = whole.spec.layers[0]!, c = compact.spec.layers[0]!, width = w.outDim;
    for (const f of ['weights', 'mWeights', 'vWeights', 'rowSteps'] as const) {
      const per = f === 'rowSteps' ? 1 : width;
      inputs.forEach((j, i) => expect(Array.from(c[f].subarray(i * per, (i + 1) * per))).toEqual(Array.from(w[f].subarray(j * per, (j + 1) * per))));
    }
    expect(Array.from(w.mWeights).some((x) => x !== 0)).toBe(true);
    expect(Array.from(c.bias)).toEqual(Array.from(w.bias));
    expect(weights(compact).slice(1)).toEqual(weights(whole).slice(1));
    const a = await whole.predict(data, { k: 5, workers: 0 }), b = await compact.predict(small, { k: 5, workers: 0 });
    expect(Array.from(b.labels)).toEqual(Array.from(a.labels));
    expect(Array.from(b.scores)).toEqual(Array.from(a.scores));
    // A feature outside the kept inputs is refused, not mapped somewhere.
    expect(() => compactFeatures(data, inputs.subarray(1))).toThrow(/not among the kept inputs/);
  });

  it('fewInputs: whether the data holds under half of the input features (then fit() maps no untouched rows)', () => {
    const data = synthesize({ shape: 'tiny', points: 200, seed: 9 });
    const held = compactInputs(new Network({ inputDim: data.features, seed: 1, layers: [{ size: 4 }, { size: data.labels }] }), data)?.length ?? data.features;
    expect(fewInputs(data, 2 * held + 1)).toBe(true);
    expect(fewInputs(data, 2 * held)).toBe(false);
    expect(fewInputs(data, held)).toBe(false);
  });

  it('a network trained on few of its input features leaves its Adam moments to small pages (only the touched rows become resident)', async () => {
    // 200 points on features spread over 600,000 inputs (one in 600 used): the moments are 77 MB each, and
    // huge pages would zero the 2 MiB around every written row, i.e. all of them.
    const d = synthesize({ shape: 'tiny', points: 200, seed: 2 });
    const stride = Math.ceil(600_000 / d.features);
    const data: SparseDataset = { ...d, features: d.features * stride, indices: Uint32Array.from(d.indices, (j) => j * stride) };
    const net = new Network({ inputDim: data.features, seed: 1, layers: [{ size: 32 }, { size: data.labels }] });
    const l0 = net.spec.layers[0]!;
    const before = process.memoryUsage().rss;
    await fit(net, data, { workers: 0, epochs: 1, validation: false, calibration: false });
    const grown = process.memoryUsage().rss - before;
    expect(l0.smallPages).toBe(true);
    // Resident: the rows of the ~d.features features used (4 KiB pages), not 2 x 77 MB of zeroed huge pages.
    expect(l0.mWeights.byteLength).toBeGreaterThan(70e6);
    expect(grown).toBeLessThan(40e6); // (where the kernel has no transparent huge pages, this holds either way)
    // Trained on most of its features, a layer keeps the huge pages.
    const dense = { ...d, features: d.features };
    const all = new Network({ inputDim: dense.features, seed: 1, layers: [{ size: 32 }, { size: dense.labels }] });
    await fit(all, dense, { workers: 0, epochs: 1, validation: false, calibration: false });
    expect(all.spec.layers[0]!.smallPages).toBeUndefined();
  });

  it('k-fold selection on a network whose input holds features the data lacks chooses as on the data alone', async () => {
    const data = synthesize({ shape: 'tiny', points: 300, seed: 5 });
    const layers = [{ size: 32, dropout: 0.3 }, { size: data.labels }];
    const opts: FitOptions = { workers: 0, validation: { maxEpochs: 6, patience: 1 }, inputScaling: 'off', calibration: false };
    // The same initial weights for the data's features: network b's are a's rows (a's input is the data's).
    const a = new Network({ inputDim: data.features, seed: 3, layers });
    const b = new Network({ inputDim: data.features + 500, seed: 3, layers });
    const present = compactInputs(a, data) ?? Uint32Array.from({ length: data.features }, (_, i) => i);
    b.spec.layers[0]!.weights.fill(0.5); // the rows the data never reaches: anything
    present.forEach((j) => b.spec.layers[0]!.weights.set(a.spec.layers[0]!.weights.subarray(j * 32, (j + 1) * 32), j * 32));
    b.spec.layers[1]!.weights.set(a.spec.layers[1]!.weights);
    const [sa, sb] = [await fit(a, data, opts), await fit(b, data, opts)];
    expect(sb.selection!.method).toBe('kfold');
    expect(sb.selection).toEqual(sa.selection);
  });
});

describe("k-fold selection's re-ranker weight", () => {
  it('is chosen on each fold at the selected epoch: the snapshots hold the weights of a fold run of exactly that many epochs', async () => {
    // Each fold keeps its weights at the best mean epoch (copied as it leaves the epoch barrier, its worker thread
    // idle until then): their scores must be those of a fresh copy trained on the fold's other points for the
    // selected epochs and no more.
    const data = synthesize({ shape: 'tiny', points: 200, seed: 11 });
    const config: NetworkConfig = { inputDim: data.features, seed: 4, layers: [{ size: 32, dropout: 0.3 }, { size: data.labels, rerank: {} }] };
    const validation = { maxEpochs: 30, patience: 1, schedule: 'plateau' as const };
    const opts: FitOptions = { workers: 1, lr: 0.005, validation, inputScaling: 'off', calibration: false };
    const net = new Network(config);
    const st = await fit(net, data, opts);
    const s = st.selection!;
    expect(s.method).toBe('kfold');
    if (s.method !== 'kfold') return;
    expect(s.epochs).toBeGreaterThan(1);
    expect(s.epochs).toBeLessThan(s.scores.length); // the folds trained on past the selected epoch
    // The reference: every fold on its own, for s.epochs epochs, then foldRerankWeight's scoring.
    const v = resolveValidation(validation);
    const outDim = data.labels, S = Math.min(resolveConfig(config).layers.at(-1)!.rerank!.shortlist, outDim);
    const sums = RERANK_WEIGHTS.map(() => ({ p1: 0, p3: 0, p5: 0, score: 0 }));
    const start = new Network(config);
    for (const part of kfoldSplit(data.points, s.folds, start.seed)) {
      const fold = copyOf(start);
      const trainPart = subset(data, part.train), heldPart = subset(data, part.holdout);
      await fit(fold, trainPart, { epochs: s.epochs, validation: false, calibration: false, lr: 0.005, workers: 0, threads: 1, inputScaling: 'off' });
      const top = await fold.predict(trainPart, { k: S, workers: 0 });
      const state = trainRerank(trainPart, null, top.labels, S, { labels: outDim, features: data.features }, resolveConfig(config).layers.at(-1)!.rerank!, 1, start.seed);
      const held = await fold.predict(heldPart, { k: S, workers: 0 });
      const sc = rerankScores(state, heldPart, null, held.labels, S, data.features, 1);
      rerankWeightSums(heldPart, held.labels, held.scores, sc, S, v.metric === 'p1' ? [1] : [1, 3, 5]).forEach((t, w) => {
        const u = sums[w]!;
        u.p1 += t.p1, u.p3 += t.p3, u.p5 += t.p5, u.score += t.score;
      });
    }
    expect(s.rerank!.tried).toEqual(rerankTries(sums, data.points));
  });
});
