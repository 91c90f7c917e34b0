// Training that decides its own length (src/train/early-stop.ts and Network.fit): the held-out split,
// the plateau schedule and the stopping rule, and the weights that fit() leaves in the network.
import { describe, expect, it } from 'vitest';
import { synthesize } from '../../datasets/synth.js';
import { subset } from '../../datasets/split-reader.js';
import { Network } from '../../src/network/network.js';
import { computeMetrics } from '../../src/train/metrics.js';
import type { FitProgress } from '../../src/train/fit.js';
import {
  earlyStopStep, holdoutSplit, initialEarlyStop, resolveValidation, WeightSnapshot, type ValidationPoint,
} from '../../src/train/early-stop.js';

const point = (epoch: number, score: number, lr = 1e-3): ValidationPoint => ({ epoch, p1: score, p3: score, p5: score, score, lr });

describe('resolveValidation', () => {
  it('fills the documented defaults', () => {
    expect(resolveValidation({})).toEqual({ fraction: 0.05, maxPoints: 5000, patience: 3, maxEpochs: 50, lrDecay: 0.5, minDelta: 0, metric: 'p135', minHoldout: 100, folds: 5, blend: true });
  });
  it.each([
    [{ fraction: 0 }, 'Expected number in (0, 1) for validation.fraction but received 0'],
    [{ fraction: 1 }, 'Expected number in (0, 1) for validation.fraction but received 1'],
    [{ patience: 0 }, 'Expected integer >= 1 for validation.patience but received 0'],
    [{ maxEpochs: 2.5 }, 'Expected integer >= 1 for validation.maxEpochs but received 2.5'],
    [{ lrDecay: 0 }, 'Expected number in (0, 1] for validation.lrDecay but received 0'],
    [{ metric: 'p3' }, `Expected 'p1' or 'p135' for validation.metric but received "p3"`],
    [{ minDelta: -0.1 }, 'Expected number in [0, 1) for validation.minDelta but received -0.1'],
    [{ patiense: 2 }, 'Unknown option validation.patiense'],
    [{ minHoldout: 0 }, 'Expected integer >= 1 for validation.minHoldout but received 0'],
    [{ folds: 1 }, 'Expected integer >= 2 for validation.folds but received 1'],
    [{ blend: 'yes' }, 'Expected boolean for validation.blend but received "yes"'],
  ])('rejects %j', (v, msg) => {
    expect(() => resolveValidation(v as never)).toThrow(msg);
  });
});

describe('holdoutSplit', () => {
  it('is a seeded partition of the rows, capped by maxPoints, never empty on either side', () => {
    const a = holdoutSplit(1000, 0.05, 5000, 7);
    expect(a.holdout.length).toBe(50);
    expect(a.train.length).toBe(950);
    const all = new Set([...a.train, ...a.holdout]);
    expect(all.size).toBe(1000);
    expect([...a.holdout]).toEqual([...a.holdout].sort((x, y) => x - y));
    expect(holdoutSplit(1000, 0.05, 5000, 7)).toEqual(a);
    expect([...holdoutSplit(1000, 0.05, 5000, 8).holdout]).not.toEqual([...a.holdout]);
    expect(holdoutSplit(1000, 0.5, 30, 7).holdout.length).toBe(30);
    expect(holdoutSplit(3, 0.01, 10, 1).holdout.length).toBe(1);
    expect(holdoutSplit(2, 0.99, 10, 1).train.length).toBe(1);
  });
});

describe('earlyStopStep', () => {
  it('records the best, cuts the rate on each epoch without a new best, and stops after `patience` of them', () => {
    const o = resolveValidation({ patience: 2, lrDecay: 0.5 });
    const s = initialEarlyStop();
    expect(earlyStopStep(s, o, point(1, 0.3))).toBe('best');
    expect(earlyStopStep(s, o, point(2, 0.5))).toBe('best');
    expect(earlyStopStep(s, o, point(3, 0.5))).toBe('worse'); // equal is not better
    expect(s.lrScale).toBe(0.5);
    expect(earlyStopStep(s, o, point(4, 0.6))).toBe('best'); // a new best resets the count, not the rate
    expect(s.lrScale).toBe(0.5);
    expect(earlyStopStep(s, o, point(5, 0.55))).toBe('worse');
    expect(s.lrScale).toBe(0.25);
    expect(earlyStopStep(s, o, point(6, 0.58))).toBe('stop');
    expect(s.bestEpoch).toBe(4);
    expect(s.bestScore).toBe(0.6);
    expect(s.history.map((p) => p.epoch)).toEqual([1, 2, 3, 4, 5, 6]);
  });
  it('counts only gains above minDelta as a new best', () => {
    const o = resolveValidation({ patience: 2, minDelta: 0.01 });
    const s = initialEarlyStop();
    expect(earlyStopStep(s, o, point(1, 0.0))).toBe('best'); // the first epoch is always the first best
    expect(earlyStopStep(s, o, point(2, 0.005))).toBe('worse');
    expect(earlyStopStep(s, o, point(3, 0.02))).toBe('best');
    expect(earlyStopStep(s, o, point(4, 0.025))).toBe('worse');
    expect(earlyStopStep(s, o, point(5, 0.029))).toBe('stop');
    expect(s.bestEpoch).toBe(3);
  });
});

describe('fit with held-out validation', () => {
  // 1,200 points hold out 60: below the default minHoldout (k-fold selection, test/train/selection.test.ts).
  const data = synthesize({ shape: 'tiny', points: 1200, seed: 3 });
  const config = { inputDim: data.features, seed: 2, layers: [{ size: 32, dropout: 0.3 }, { size: data.labels }] };

  it('decides the number of epochs, reports the curve and leaves the best epoch\'s weights in the network', async () => {
    const net = new Network(config);
    const progress: FitProgress[] = [];
    const stats = await net.fit(data, { workers: 0, validation: { patience: 2, maxEpochs: 30, minHoldout: 60 }, progressEvery: 0, onProgress: (p) => progress.push(p) });
    // The 30-epoch cap is no plan: onProgress says so, and times the epoch in progress.
    expect(progress.length).toBeGreaterThan(0);
    expect(progress.every((p) => p.epochsIsLimit && p.epochs === 30)).toBe(true);
    const mid = progress.find((p) => p.batch > 0 && p.batch < p.batchesPerEpoch)!;
    expect(mid.epochEtaSeconds).toBeCloseTo(((mid.batchesPerEpoch - mid.batch) * 128) / mid.samplesPerSec, 6);
    expect(mid.etaSeconds).toBeGreaterThan(mid.epochEtaSeconds);
    const v = stats.validation!;
    expect(stats.validationPoints).toBe(60);
    expect(v.length).toBe(stats.epochs);
    expect(stats.epochs).toBeGreaterThanOrEqual(3);
    expect(stats.epochs).toBeLessThan(30);
    const best = v.reduce((a, p) => (p.score > a.score ? p : a));
    expect(stats.bestEpoch).toBe(best.epoch);
    // Stopped because the last `patience` epochs brought no new best, with the rate halved after each.
    expect(v.slice(-2).every((p) => p.score <= best.score)).toBe(true);
    expect(v.at(-1)!.lr).toBe(v[0]!.lr / 2);
    // The network holds the best epoch's weights: its held-out P@k are the best epoch's, exactly.
    const { holdout } = holdoutSplit(data.points, 0.05, 5000, config.seed);
    const h = subset(data, holdout);
    const pred = await net.predict(h, { k: 5, workers: 0 });
    const m = computeMetrics({ topIdx: pred.labels, kMax: 5, labelOffsets: h.labelOffsets, labelIndices: h.labelIndices });
    expect([m.p1, m.p3, m.p5]).toEqual([best.p1, best.p3, best.p5]);
    expect(stats.history.length).toBe(stats.epochs);
    expect(stats.history.map((e) => e.epoch)).toEqual(v.map((p) => p.epoch));
  });

  it('--epochs style: an explicit count trains exactly that many epochs on all rows, without validation', async () => {
    const net = new Network(config);
    let fixed: boolean | undefined;
    const stats = await net.fit(data, { workers: 0, epochs: 2, onProgress: (p) => (fixed = !p.epochsIsLimit) });
    expect(fixed).toBe(true);
    expect(stats.epochs).toBe(2);
    expect(stats.validation).toBeUndefined();
    expect(stats.samples).toBe(2 * data.points);
  });

  it('held-out rows are never trained on', async () => {
    const net = new Network(config);
    const stats = await net.fit(data, { workers: 0, validation: { maxEpochs: 1, minHoldout: 60 } });
    expect(stats.samples).toBe(data.points - 60);
    expect(stats.selection).toEqual({ method: 'holdout', points: 60, epochs: 1, reason: '60 held-out points (at least minHoldout 60): the best epoch\'s weights are kept' });
  });
});

describe('WeightSnapshot', () => {
  it('copies weights and biases out and back', () => {
    const net = new Network({ inputDim: 10, layers: [{ size: 4 }, { size: 3 }] });
    const snap = new WeightSnapshot(net.spec);
    net.spec.layers[1]!.bias[2] = 5;
    snap.take(net.spec);
    const w0 = net.spec.layers[0]!.weights.slice();
    net.spec.layers[0]!.weights.fill(1);
    net.spec.layers[1]!.bias.fill(0);
    snap.restore(net.spec);
    expect(net.spec.layers[0]!.weights).toEqual(w0);
    expect(net.spec.layers[1]!.bias[2]).toBe(5);
  });
});
