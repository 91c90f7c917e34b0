// Training that decides its own length (src/train/early-stop.ts and Network.fit): the held-out split,
// the plateau schedule and the stopping rule, and the weights that fit() leaves in the network.
import { describe, expect, it } from 'vitest';
import { synthesize } from '../../src/datasets/synth.js';
import { subset } from '../../src/datasets/split-reader.js';
import { Network } from '../../src/network/network.js';
import { computeMetrics, pointPrecisions } from '../../src/network/metrics.js';
import type { FitProgress } from '../../src/train/fit.js';
import {
  annealMultiplier, descentEpochs,
  earlyStopStep, hasRisen, holdoutSplit, initialEarlyStop, pairedGain, resolveValidation, WeightSnapshot, type EarlyStopState, type ResolvedValidation,
  type ValidationPoint,
} from '../../src/train/early-stop.js';
import { Xoshiro128 } from '../../src/util/rng.js';
import { fit } from '../../src/train/fit-network.js';

const point = (epoch: number, score: number, lr = 1e-3): ValidationPoint => ({ epoch, p1: score, p3: score, p5: score, score, lr });
/** earlyStopStep's decision as one word: 'stop', else 'best' (a new best) or 'worse'. */
const step = (s: EarlyStopState, o: ResolvedValidation, p: ValidationPoint, points?: ArrayLike<number>): string => {
  const r = earlyStopStep(s, o, p, points);
  return r.stop ? 'stop' : r.best ? 'best' : 'worse';
};

describe('resolveValidation', () => {
  it('fills the documented defaults', () => {
    expect(resolveValidation({})).toEqual({
      fraction: 0.05, maxPoints: 5000, patience: 1, maxEpochs: 50, lrDecay: 0.5, minDelta: 0, minGain: 0.001, significance: 1, metric: 'p135',
      minHoldout: 100, folds: 5, refitMaxPoints: 0, blend: true, schedule: 'anneal', annealEpochs: 1,
    });
    expect(resolveValidation({ schedule: 'plateau' }).patience).toBe(3);
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
    [{ significance: -1 }, 'Expected number in [0, 10] for validation.significance but received -1'],
    [{ minGain: 1 }, 'Expected number in [0, 1) for validation.minGain but received 1'],
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
    const o = resolveValidation({ schedule: 'plateau', patience: 2, lrDecay: 0.5 });
    const s = initialEarlyStop();
    expect(step(s, o, point(1, 0.3))).toBe('best');
    expect(step(s, o, point(2, 0.5))).toBe('best');
    expect(step(s, o, point(3, 0.5))).toBe('worse'); // equal is not better
    expect(s.lrScale).toBe(0.5);
    expect(step(s, o, point(4, 0.6))).toBe('best'); // a new best resets the count, not the rate
    expect(s.lrScale).toBe(0.5);
    expect(step(s, o, point(5, 0.55))).toBe('worse');
    expect(s.lrScale).toBe(0.25);
    expect(step(s, o, point(6, 0.58))).toBe('stop');
    expect(s.bestEpoch).toBe(4);
    expect(s.bestScore).toBe(0.6);
    expect(s.history.map((p) => p.epoch)).toEqual([1, 2, 3, 4, 5, 6]);
  });
  it('counts only gains above minDelta as a new best', () => {
    const o = resolveValidation({ schedule: 'plateau', patience: 2, minDelta: 0.01 });
    const s = initialEarlyStop();
    expect(step(s, o, point(1, 0.0))).toBe('best'); // the first epoch is always the first best
    expect(step(s, o, point(2, 0.005))).toBe('worse');
    expect(step(s, o, point(3, 0.02))).toBe('best');
    expect(step(s, o, point(4, 0.025))).toBe('worse');
    expect(step(s, o, point(5, 0.029))).toBe('stop');
    expect(s.bestEpoch).toBe(3);
  });
});

describe("schedule 'anneal'", () => {
  it('keeps the rate while the score improves, then descends over annealEpochs epochs and stops', () => {
    const o = resolveValidation({ annealEpochs: 2, minGain: 0 });
    expect([o.schedule, o.patience]).toEqual(['anneal', 1]);
    const s = initialEarlyStop();
    expect(step(s, o, point(1, 0.3))).toBe('best');
    expect(step(s, o, point(2, 0.5))).toBe('best');
    expect(s.annealFrom).toBeUndefined();
    expect(step(s, o, point(3, 0.45))).toBe('worse'); // the stall: the descent starts after epoch 3
    expect(s.annealFrom).toBe(3);
    expect(s.lrScale).toBe(1); // no halving: the descent is the only cut
    expect(step(s, o, point(4, 0.55))).toBe('best'); // descending epochs still count as bests
    expect(step(s, o, point(5, 0.52))).toBe('stop');
    expect([s.bestEpoch, s.bestScore]).toEqual([4, 0.55]);
  });
  it('patience 2: one epoch without a gain is not yet a stall', () => {
    const o = resolveValidation({ patience: 2, minGain: 0 });
    const s = initialEarlyStop();
    step(s, o, point(1, 0.5));
    expect(step(s, o, point(2, 0.4))).toBe('worse');
    expect(s.annealFrom).toBeUndefined();
    expect(step(s, o, point(3, 0.45))).toBe('worse');
    expect(s.annealFrom).toBe(3);
    expect(step(s, o, point(4, 0.46))).toBe('stop');
  });
  it('annealMultiplier: 1 before the stall, then linear to 0 over annealEpochs epochs', () => {
    expect(annealMultiplier(undefined, 1, 7, 3, 10)).toBe(1);
    expect(annealMultiplier(3, 2, 2, 9, 10)).toBe(1); // an epoch before the descent
    expect(annealMultiplier(3, 2, 3, 0, 10)).toBe(1);
    expect(annealMultiplier(3, 2, 3, 5, 10)).toBeCloseTo(0.75, 12);
    expect(annealMultiplier(3, 2, 4, 5, 10)).toBeCloseTo(0.25, 12);
    expect(annealMultiplier(3, 2, 5, 0, 10)).toBe(0);
  });
});

describe('minGain and significance: which new bests count as an improvement', () => {
  /** Per-point scores of 1,000 held-out points: those in `right` 1, the others 0. */
  const scores = (right: number[]): Float64Array => {
    const a = new Float64Array(1000);
    for (const i of right) a[i] = 1;
    return a;
  };
  const range = (a: number, b: number) => Array.from({ length: b - a }, (_, i) => a + i);
  const mean = (a: Float64Array) => a.reduce((t, v) => t + v, 0) / a.length;

  it('pairedGain: the mean per-point difference and its standard error', () => {
    const g = pairedGain([1, 0, 1, 1], [0, 0, 1, 0]);
    expect(g.gain).toBe(0.5);
    expect(g.se).toBeCloseTo(Math.sqrt(((0.25 + 0.25 + 0.25 + 0.25) / 3) / 4), 12);
    expect(pairedGain([0.5], [0.25])).toEqual({ gain: 0.25, se: 0 });
    expect(() => pairedGain([1, 2], [1])).toThrow(/equally long/);
  });

  it('minGain: stops on a plateau of tiny new bests, keeps the rate and the last of them, and counts slow gains once they add up', () => {
    const o = resolveValidation({ schedule: 'plateau', patience: 3, lrDecay: 0.5 }); // minGain 0.001
    const s = initialEarlyStop();
    const at = (epoch: number, score: number) => step(s, o, point(epoch, score));
    expect(at(1, 0.5)).toBe('best');
    expect(at(2, 0.6)).toBe('best');
    expect([s.bad, s.refEpoch, s.refScore]).toEqual([0, 2, 0.6]);
    expect(at(3, 0.6004)).toBe('best'); // +0.0004: kept, not counted, the rate stays
    expect([s.bad, s.lrScale, s.refEpoch, s.bestEpoch]).toEqual([1, 1, 2, 3]);
    expect(at(4, 0.6008)).toBe('best');
    expect(s.bad).toBe(2);
    expect(at(5, 0.6012)).toBe('best'); // +0.0012 over epoch 2: the slow rise counts
    expect([s.bad, s.refEpoch]).toEqual([0, 5]);
    expect(at(6, 0.6)).toBe('worse');
    expect(s.lrScale).toBe(0.5);
    expect(at(7, 0.6015)).toBe('best');
    expect(at(8, 0.6018)).toBe('stop'); // +0.0006 over epoch 5
    expect(s.bestEpoch).toBe(8);
  });

  it('significance: stops on a plateau of tiny new bests, keeping the last of them, and counts slow gains once they add up', () => {
    const o = resolveValidation({ schedule: 'plateau', patience: 3, lrDecay: 0.5, minGain: 0, significance: 1 });
    const s = initialEarlyStop();
    // Epoch e: points [lost, 500 + won) right (the churn of an epoch: some points lost, a few more won).
    const at = (epoch: number, lost: number, won: number) => {
      const a = scores(range(lost, 500 + won));
      return step(s, o, point(epoch, mean(a)), a);
    };
    expect(at(1, 0, 0)).toBe('best');
    expect(s.refEpoch).toBe(1);
    expect(at(2, 0, 100)).toBe('best'); // +0.1, se 0.0095: counts
    expect(s.refEpoch).toBe(2);
    expect(s.bad).toBe(0);
    expect(s.history[1]!.gain).toEqual({ ref: 1, gain: expect.closeTo(0.1, 12), se: expect.closeTo(Math.sqrt((0.1 * 0.9 * 1000) / 999 / 1000), 12) });
    // 20 lost, 22 won over epoch 2: +0.002, se 0.0065: a new best, not counted.
    expect(at(3, 20, 122)).toBe('best');
    expect([s.bad, s.refEpoch, s.bestEpoch]).toEqual([1, 2, 3]);
    // The gains add up against the reference epoch: 20 lost, 40 won over epoch 2 is +0.02, se 0.0077.
    expect(at(4, 20, 140)).toBe('best');
    expect([s.bad, s.refEpoch]).toEqual([0, 4]);
    expect(at(5, 30, 151)).toBe('best'); // +0.001 over epoch 4, se 0.0033
    expect(at(6, 30, 152)).toBe('best');
    expect(at(7, 30, 153)).toBe('stop');
    expect(s.bestEpoch).toBe(7); // its weights are kept
    expect(s.lrScale).toBe(1); // every epoch was a new best
  });

  it('the defaults: a new best above minGain but within one standard error of the held-out noise is the stall', () => {
    const o = resolveValidation({}); // anneal, patience 1, minGain 0.001, significance 1
    const run = (third: Float64Array) => {
      const s = initialEarlyStop();
      for (const [e, a] of [[1, scores(range(0, 500))], [2, scores(range(0, 600))], [3, third]] as const) step(s, o, point(e, mean(a)), a);
      return s;
    };
    // Epoch 3: 20 points lost, 23 won over epoch 2: +0.003 (three times minGain), se 0.0066: noise, the stall.
    const noisy = run(scores(range(20, 623)));
    expect(noisy.history[2]!.gain).toEqual({ ref: 2, gain: expect.closeTo(0.003, 12), se: expect.closeTo(0.00656, 4) });
    expect([noisy.bestEpoch, noisy.annealFrom, noisy.refEpoch]).toEqual([3, 3, 2]); // kept as the best, not counted
    // 20 lost, 60 won: +0.04, se 0.0089: a gain; the rate stays and training goes on.
    const real = run(scores(range(20, 660)));
    expect([real.bestEpoch, real.annealFrom, real.refEpoch]).toEqual([3, undefined, 3]);
  });

  it('the defaults: the standard-error bar applies once a gain has cleared it (hasRisen), not to a slow start', () => {
    const o = resolveValidation({});
    const s = initialEarlyStop();
    const at = (epoch: number, a: Float64Array) => step(s, o, point(epoch, mean(a)), a);
    at(1, scores(range(0, 500)));
    // +0.003, se 0.0066: within the noise, but no gain has cleared the bar yet: minGain alone decides.
    expect(at(2, scores(range(20, 523)))).toBe('best');
    expect([s.refEpoch, s.annealFrom, hasRisen(s.history, o, 3)]).toEqual([2, undefined, false]);
    expect(at(3, scores(range(20, 623)))).toBe('best'); // +0.1, se 0.0095: the curve has risen
    expect([s.refEpoch, hasRisen(s.history, o, 4), hasRisen(s.history, o, 3)]).toEqual([3, true, false]);
    expect(at(4, scores(range(40, 646)))).toBe('best'); // +0.003 again, now within the noise: the stall
    expect([s.refEpoch, s.annealFrom]).toEqual([3, 4]);
  });

  it('a gain of points that also loses others is weighed by its spread', () => {
    const o = resolveValidation({ schedule: 'plateau', patience: 3, minGain: 0, significance: 1 });
    const s = initialEarlyStop();
    const z = scores(range(0, 400)), a = scores(range(0, 500)); // epoch 2: +0.1, se 0.0095, the curve has risen
    step(s, o, point(1, mean(z)), z);
    step(s, o, point(2, mean(a)), a);
    const b = scores(range(35, 540)); // 35 lost, 40 won: +0.005, se 0.0087
    expect(step(s, o, point(3, mean(b)), b)).toBe('best');
    expect(s.bad).toBe(1);
    const c = scores(range(30, 560)); // 30 lost, 60 won over epoch 2: +0.03, se 0.0095
    expect(step(s, o, point(4, mean(c)), c)).toBe('best');
    expect([s.bad, s.refEpoch]).toEqual([0, 4]);
    // With significance 4, +0.03 (3.2 se) does not count either.
    const s2 = initialEarlyStop(), o2 = resolveValidation({ schedule: 'plateau', patience: 3, minGain: 0, significance: 4 });
    step(s2, o2, point(1, mean(z)), z);
    step(s2, o2, point(2, mean(a)), a);
    step(s2, o2, point(3, mean(c)), c);
    expect([s2.bad, s2.refEpoch]).toEqual([1, 2]);
  });

  it('minGain 0 with significance 0 (or without per-point scores) counts every new best', () => {
    for (const [o, withPoints] of [[resolveValidation({ schedule: 'plateau', patience: 2, minGain: 0, significance: 0 }), true], [resolveValidation({ schedule: 'plateau', patience: 2, minGain: 0, significance: 1 }), false]] as const) {
      const s = initialEarlyStop();
      for (let e = 1; e <= 6; e++) {
        const a = scores(range(0, 500 + e));
        expect(step(s, o, point(e, mean(a)), withPoints ? a : undefined)).toBe('best');
      }
      expect([s.bad, s.lrScale]).toEqual([0, 1]);
    }
  });

  it('pointPrecisions: per-point terms whose mean is P@1 and (P@1 + P@3 + P@5) / 3', () => {
    const rng = new Xoshiro128(9);
    const n = 200, L = 12;
    const off = new Uint32Array(n + 1), lab: number[] = [];
    const top = new Uint32Array(n * 5);
    for (let i = 0; i < n; i++) {
      const ls = [...new Set(Array.from({ length: 1 + (i % 4) }, () => rng.below(L)))].sort((x, y) => x - y);
      if (i % 17 === 0) ls.length = 0; // points without labels count as misses
      lab.push(...ls);
      off[i + 1] = lab.length;
      const perm = Array.from({ length: L }, (_, j) => j);
      for (let j = L - 1; j > 0; j--) { const k = rng.below(j + 1); [perm[j], perm[k]] = [perm[k]!, perm[j]!]; }
      for (let r = 0; r < 5; r++) top[i * 5 + r] = i % 23 === 0 && r === 4 ? 0xffffffff : perm[r]!;
    }
    const li = Uint32Array.from(lab);
    const m = computeMetrics({ topIdx: top, kMax: 5, labelOffsets: off, labelIndices: li });
    const p1 = pointPrecisions(top, 5, off, li, [1]);
    const p135 = pointPrecisions(top, 5, off, li, [1, 3, 5]);
    expect(mean(p1)).toBeCloseTo(m.p1!, 12);
    expect(mean(p135)).toBeCloseTo((m.p1! + m.p3! + m.p5!) / 3, 12);
    expect(() => pointPrecisions(top, 5, off, li, [3, 1])).toThrow(/ascending/);
  });
});

describe('fit with held-out validation', () => {
  // 1,200 points hold out 60: below the default minHoldout (k-fold selection, test/train/selection.test.ts).
  const data = synthesize({ shape: 'tiny', points: 1200, seed: 3 });
  const config = { inputDim: data.features, seed: 2, layers: [{ size: 32, dropout: 0.3 }, { size: data.labels }] };

  it('decides the number of epochs, reports the curve and leaves the best epoch\'s weights in the network', async () => {
    const net = new Network(config);
    const progress: FitProgress[] = [];
    const stats = await fit(net, data, { workers: 0, validation: { schedule: 'plateau', patience: 2, maxEpochs: 30, minHoldout: 60, refitMaxPoints: 0 }, progressEvery: 0, onProgress: (p) => progress.push(p) });
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
    const stats = await fit(net, data, { workers: 0, epochs: 2, onProgress: (p) => (fixed = !p.epochsIsLimit) });
    expect(fixed).toBe(true);
    expect(stats.epochs).toBe(2);
    expect(stats.validation).toBeUndefined();
    expect(stats.samples).toBe(2 * data.points);
  });

  it("schedule 'anneal' (the default): descends after the first stall for at least 64 batches, then stops, keeping the best epoch", async () => {
    const net = new Network(config);
    const lrs: number[] = [];
    const stats = await fit(net, data, {
      workers: 0, validation: { maxEpochs: 30, minHoldout: 60 },
      lrSchedule: (e, b, bpe) => (lrs.push(e + b / bpe), 1), // records where every batch falls
    });
    const v = stats.validation!;
    // 1,140 training points: 9 batches an epoch, so the descent takes ceil(64 / 9) = 8 epochs.
    const a = stats.anneal!;
    expect(a.epochs).toBe(descentEpochs(1, 9));
    expect(a.epochs).toBe(8);
    expect(stats.epochs).toBe(Math.min(30, a.from + a.epochs));
    expect(v.length).toBe(stats.epochs);
    // The epochs before the descent train at the full rate, each of the descent's at its mean.
    const lr0 = v[0]!.lr;
    expect(v.slice(0, a.from).every((p) => p.lr === lr0)).toBe(true);
    v.slice(a.from).forEach((p, i) => expect(p.lr).toBeCloseTo(lr0 * (1 - (i + 0.5) / a.epochs), 12));
    expect(stats.bestEpoch).toBe(v.reduce((a, p) => (p.score > a.score ? p : a)).epoch);
    expect(lrs.length).toBe(stats.batches);
  });

  it('held-out rows are never trained on', async () => {
    const net = new Network(config);
    const stats = await fit(net, data, { workers: 0, validation: { maxEpochs: 1, minHoldout: 60, refitMaxPoints: 0 } });
    expect(stats.samples).toBe(data.points - 60);
    expect(stats.selection).toEqual({ method: 'holdout', points: 60, epochs: 1, reason: '60 held-out points (at least minHoldout 60): the best epoch\'s weights are kept (not trained again on all points: refitMaxPoints is 0)' });
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

  it('with rows0, keeps only those rows of layer 0 (packed) and restores them, leaving the other rows as they are', () => {
    const net = new Network({ inputDim: 10, layers: [{ size: 4 }, { size: 3 }] });
    const l0 = net.spec.layers[0]!, l1 = net.spec.layers[1]!;
    const snap = new WeightSnapshot(net.spec, Uint32Array.of(2, 7));
    expect(snap.weights[0]!.length).toBe(2 * 4);
    expect(snap.weights[1]!.length).toBe(l1.weights.length);
    snap.take(net.spec);
    expect([...snap.weights[0]!]).toEqual([...l0.weights.subarray(8, 12), ...l0.weights.subarray(28, 32)]);
    const w0 = l0.weights.slice(), w1 = l1.weights.slice();
    l0.weights.fill(1);
    l1.weights.fill(1);
    snap.restore(net.spec);
    const want = Float32Array.from({ length: 40 }, (_, i) => ((i >= 8 && i < 12) || (i >= 28 && i < 32) ? w0[i]! : 1));
    expect(l0.weights).toEqual(want);
    expect(l1.weights).toEqual(w1);
  });

  // What rows0 relies on: training changes only the layer-0 rows of the features its data holds (k-fold
  // selection's fold snapshots keep just those).
  it.each([[0, 1], [1, 2]])('fit (workers %i, threads %i) leaves the layer-0 rows of features absent from its data untouched', async (workers, threads) => {
    const data = synthesize({ shape: 'tiny', points: 300, seed: 5 });
    const drop = new Set(Array.from({ length: data.features }, (_, j) => j).filter((j) => j % 3 === 0));
    // The data without every third feature.
    const keep: number[] = [];
    const offsets = new Uint32Array(data.points + 1);
    for (let i = 0; i < data.points; i++) {
      for (let e = data.offsets[i]!; e < data.offsets[i + 1]!; e++) if (!drop.has(data.indices[e]!)) keep.push(e);
      offsets[i + 1] = keep.length;
    }
    const part = { ...data, offsets, indices: Uint32Array.from(keep, (e) => data.indices[e]!), values: Float32Array.from(keep, (e) => data.values[e]!) };
    const net = new Network({ inputDim: data.features, seed: 2, layers: [{ size: 32, dropout: 0.5 }, { size: data.labels }] });
    const before = net.spec.layers[0]!.weights.slice();
    await fit(net, part, { epochs: 3, workers, threads });
    const w = net.spec.layers[0]!.weights, H = 32;
    let changedKept = 0, changedDropped = 0;
    for (let j = 0; j < data.features; j++) {
      const same = w.subarray(j * H, (j + 1) * H).every((x, h) => x === before[j * H + h]);
      if (!same) drop.has(j) ? changedDropped++ : changedKept++;
    }
    expect(changedDropped).toBe(0);
    expect(changedKept).toBeGreaterThan(0.9 * new Set(part.indices).size); // the rows of the features it holds do change
  });
});
