// Calibrated probabilities (src/network/calibration.ts): the logistic fit recovers a known model, the
// threshold search equals a brute-force one, ECE matches its definition on a hand example, and fit() attaches
// a calibration on each of its selection paths (held-out slice, refit copy, k-fold folds) that predict()
// applies: probabilities better calibrated than the softmax scores, selection by threshold, model files of
// version 2 that keep it, and version 1 files (written before it) that still load.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Network } from '../../src/network/network.js';
import {
  bestThreshold, calibratedProbability, calibrationPairs, expectedCalibrationError, fitCalibration, logisticFit, thresholdF1, topkF1,
  type CalibrationPairs,
} from '../../src/network/calibration.js';
import { readBinFile, writeBinFile } from '../../src/util/binfile.js';
import { subset, synthesize } from '../../src/datasets/index.js';
import { fit } from '../../src/train/fit-network.js';
import { holdoutSplit, resolveValidation } from '../../src/train/early-stop.js';
import { Xoshiro128 } from '../../src/util/rng.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sublinear-calibration-'));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/**
 * Pairs whose 2 features (as calibrationPairs makes them: ln s - ln s_1, ln(1 + rank)) are drawn at random,
 * relevant with probability sigmoid(w . x + b + (label 0 ? shift0 : 0)).
 */
function logisticPairs(n: number, w: number[], b: number, seed: number, label = (e: number) => e % 7, shift0 = 0): CalibrationPairs {
  const rng = new Xoshiro128(seed);
  const x = new Float64Array(2 * n), y = new Uint8Array(n), labels = new Uint32Array(n), scores = new Float64Array(n);
  for (let e = 0; e < n; e++) {
    x[2 * e] = -5 * rng.nextFloat();
    x[2 * e + 1] = Math.log1p(rng.below(10));
    scores[e] = Math.exp(x[2 * e]!) / 2;
    labels[e] = label(e);
    const z = w[0]! * x[2 * e]! + w[1]! * x[2 * e + 1]! + b + (labels[e] === 0 ? shift0 : 0);
    y[e] = rng.nextFloat() < 1 / (1 + Math.exp(-z)) ? 1 : 0;
  }
  const offsets = Uint32Array.from({ length: n + 1 }, (_, i) => i);
  let truths = 0;
  const relevant = new Map<number, number>();
  for (let e = 0; e < n; e++) if (y[e]) {
    truths++;
    relevant.set(labels[e]!, (relevant.get(labels[e]!) ?? 0) + 1);
  }
  return { points: n, labels, x, scores, y, offsets, truths, relevant };
}

describe('calibration: the fit', () => {
  it('the logistic fit recovers the weights of the model that drew the pairs', () => {
    const p = logisticPairs(40_000, [0.9, -0.8], 2, 1);
    const w = logisticFit(p.x, p.y, 2);
    [0.9, -0.8, 2].forEach((want, j) => expect(Math.abs(w[j]! - want), `weight ${j}`).toBeLessThan(0.15));
  });

  it('a label with enough positives gets its own shift, the others the pooled map', () => {
    const rng = new Xoshiro128(2);
    // Label 0 (every 10th pair) is relevant more often than the rest: its intercept is 2 higher.
    const p = logisticPairs(30_000, [0.9, -0.8], 1, 3, (e) => (e % 10 === 0 ? 0 : 1 + rng.below(50)), 2);
    const c = fitCalibration(p, 10, { minPositives: 400 });
    // Labels 1..50 (about 200 positives each, under minPositives) keep the pooled map.
    expect(c.labels).toEqual([0]);
    // Its intercept (pooled + shift) is near the model's 1 + 2 (the pooled weights, fitted over every pair,
    // label 0's a tenth of them, are a little off for it); the pooled one stays near 1.
    expect(Math.abs(c.bias + c.shifts[0]! - 3)).toBeLessThan(0.5);
    expect(Math.abs(c.bias - 1)).toBeLessThan(0.4);
    // Score 0.2 at rank 2 of a point whose best score is 0.5.
    const z = (label: number) => c.weights[0]! * Math.log(0.2 / 0.5) + c.weights[1]! * Math.log1p(2) + c.bias + (label === 0 ? c.shifts[0]! : 0);
    expect(calibratedProbability(c, 0, 0.2, 2, 0.5)).toBeCloseTo(1 / (1 + Math.exp(-z(0))), 12);
    expect(calibratedProbability(c, 12345, 0.2, 2, 0.5)).toBeCloseTo(1 / (1 + Math.exp(-z(12345))), 12);
    // Only ratios of scores matter: a normaliser ten times larger (sampled against exact prediction) maps alike.
    expect(calibratedProbability(c, 7, 0.02, 2, 0.05)).toBeCloseTo(calibratedProbability(c, 7, 0.2, 2, 0.5), 12);
  });

  it('the threshold is the one of best micro-F1 among all cuts (brute force)', () => {
    const p = logisticPairs(3000, [1.2, 0], 1.5, 4);
    // Every point also has relevant labels that are not candidates: recall counts them.
    p.truths += 500;
    const probs = Float64Array.from(p.y, (_, e) => 1 / (1 + Math.exp(-(1.2 * p.x[2 * e]! + 1.5))));
    const t = bestThreshold(probs, p.y, p.truths);
    let best = -1;
    for (const cut of new Set(probs)) best = Math.max(best, thresholdF1(p, probs, cut).micro);
    expect(thresholdF1(p, probs, t).micro).toBeCloseTo(best, 12);
  });

  it('ECE is the pair-weighted mean of |mean probability - fraction relevant| over 15 bins', () => {
    // Bin [0, 1/15): 0.01, 0.02 with y 0, 1 -> |0.015 - 0.5|; bin of 0.9: 0.9, 0.95 with y 1, 1 -> |0.925 - 1|.
    const e = expectedCalibrationError([0.01, 0.02, 0.9, 0.95], [0, 1, 1, 1]);
    expect(e.ece).toBeCloseTo(0.5 * 0.485 + 0.5 * 0.075, 12);
    expect(e.bins[0]).toEqual({ count: 2, meanProbability: 0.015, fractionRelevant: 0.5 });
  });

  it('F1 counts relevant labels outside the candidates as misses, and macro-F1 averages over relevant or predicted labels', () => {
    // Two points; candidates (label, relevant): point 0: (1, yes), (2, no); point 1: (1, no). Point 1 also has label 3 (not a candidate).
    const data = { points: 2, labelOffsets: Uint32Array.of(0, 1, 2), labelIndices: Uint32Array.of(1, 3) };
    const p = calibrationPairs(Uint32Array.of(1, 2, 1, 0xffffffff), Float32Array.of(0.6, 0.3, 0.5, 0), 2, data);
    expect(Array.from(p.y)).toEqual([1, 0, 0]);
    const top1 = topkF1(p, 1); // predicted: (0,1) hit, (1,1) miss; truths 2
    expect(top1.micro).toBeCloseTo((2 * 1) / (2 + 2), 12);
    // Labels: 1 (F1 2*1/(2+1)), 3 (relevant, never predicted: 0); 2 is not predicted at top-1.
    expect(top1.macro).toBeCloseTo((2 / 3 + 0) / 2, 12);
  });
});

/** Train and test points of the 'small' synthetic shape (2,000 labels). */
function data(points: number, seed: number) {
  const all = synthesize({ shape: 'small', points: points + 3000, seed });
  return {
    train: subset(all, Uint32Array.from({ length: points }, (_, i) => i)),
    test: subset(all, Uint32Array.from({ length: 3000 }, (_, i) => points + i)),
  };
}

describe('calibration: fit() attaches one, predict() applies it', () => {
  let net: Network;
  let test: ReturnType<typeof data>['test'];
  beforeAll(async () => {
    const d = data(24_000, 6);
    test = d.test;
    net = new Network({ inputDim: d.train.features, seed: 2, layers: [{ size: 64 }, { size: d.train.labels }] });
    const st = await fit(net, d.train, { validation: { maxEpochs: 6 }, workers: 2 });
    expect(st.selection?.method).toBe('holdout');
    expect(st.calibration).toMatchObject({ shortlist: 10, points: st.validationPoints });
  }, 300_000);

  it('the probabilities are calibrated on new points (ECE well below the softmax scores\', under 0.05), and threshold selection beats every top-k cut', async () => {
    const m = await net.evaluate(test, { workers: 2 });
    const c = m.calibration!;
    expect(c.eceScores).toBeGreaterThan(0.1);
    expect(c.ece).toBeLessThan(0.05);
    const bestCut = Math.max(...c.topk.map((t) => t.microF1));
    expect(c.microF1).toBeGreaterThanOrEqual(bestCut);
  }, 120_000);

  it('predict() returns probabilities beside the scores; threshold selection keeps the shortlist candidates that reach it, by probability, at most k', async () => {
    const cal = net.calibration!;
    const points = subset(test, Uint32Array.from({ length: 200 }, (_, i) => i));
    const top = await net.predict(points, { k: cal.shortlist, workers: 0 });
    expect(top.probabilities).toHaveLength(200 * cal.shortlist);
    for (let e = 0; e < top.labels.length; e++) {
      const i = Math.floor(e / cal.shortlist);
      expect(top.probabilities![e]).toBeCloseTo(calibratedProbability(cal, top.labels[e]!, top.scores[e]!, e - i * cal.shortlist, top.scores[i * cal.shortlist]!), 6);
    }
    const t = 0.3;
    const sel = await net.predict(points, { threshold: t, workers: 0 });
    expect(sel.k).toBe(cal.shortlist);
    const capped = await net.predict(points, { threshold: t, k: 2, workers: 0 });
    let some = 0;
    for (let i = 0; i < 200; i++) {
      const want = Array.from({ length: cal.shortlist }, (_, r) => i * cal.shortlist + r)
        .filter((e) => top.probabilities![e]! >= t)
        .sort((u, v) => top.probabilities![v]! - top.probabilities![u]! || u - v)
        .map((e) => top.labels[e]!);
      const got = Array.from(sel.labels.subarray(i * sel.k, (i + 1) * sel.k)).filter((l) => l !== 0xffffffff);
      expect(got).toEqual(want);
      expect(Array.from(capped.labels.subarray(i * 2, i * 2 + 2)).filter((l) => l !== 0xffffffff)).toEqual(want.slice(0, 2));
      if (want.length > 1) some++;
    }
    expect(some).toBeGreaterThan(0);
    const byModel = await net.predict(points, { threshold: 'model', workers: 0 });
    const byValue = await net.predict(points, { threshold: cal.threshold, workers: 0 });
    expect(byModel.labels).toEqual(byValue.labels);
    await expect(net.predict(points, { threshold: 0 })).rejects.toThrow("Expected a probability in (0, 1] or 'model' for threshold but received 0");
  });

  it('saves version 3 with the calibration and loads it back; a calibration that does not fit the network is refused', async () => {
    const path = join(dir, 'cal.sl');
    await net.save(path);
    const f = await readBinFile<Record<string, unknown>>(path);
    expect(f.meta.version).toBe(3);
    const back = await Network.load(path);
    expect(back.calibration).toEqual(net.calibration);
    const points = subset(test, Uint32Array.from({ length: 50 }, (_, i) => i));
    expect((await back.predict(points, { threshold: 'model', workers: 0 })).labels).toEqual((await net.predict(points, { threshold: 'model', workers: 0 })).labels);
    const rewrite = async (meta: Record<string, unknown>) => {
      const bad = join(dir, 'bad.sl');
      await writeBinFile(bad, { kind: 'model', meta: { ...f.meta, ...meta }, sections: f.sections });
      return Network.load(bad);
    };
    const cal = net.calibration!;
    await expect(rewrite({ calibration: { ...cal, labels: [...cal.labels, 99_999], shifts: [...cal.shifts, 1] } }))
      .rejects.toThrow(/bad\.sl: the calibration names label 99999 \(the network has 2000\)/);
    await expect(rewrite({ calibration: { ...cal, threshold: 1.5 } })).rejects.toThrow('invalid calibration threshold 1.5');
    await expect(rewrite({ calibration: { ...cal, weights: [1, 2, 3] } })).rejects.toThrow("the calibration's pooled map is not 2 finite weights and a finite intercept");
    await expect(rewrite({ version: 4 })).rejects.toThrow('model version 4 is newer than this sublinear (it reads versions 1 to 3): upgrade sublinear to load it');
  });

  it('loads a model file written before calibration (version 1): no probabilities, and selection by threshold says why not', async () => {
    const path = join(dir, 'old.sl');
    await copyFile(join(import.meta.dirname, 'fixtures/model-before-calibration.sl'), path);
    const f = await readBinFile<Record<string, unknown>>(path);
    expect(f.meta.version).toBeUndefined();
    const old = await Network.load(path);
    expect(old.calibration).toBeNull();
    expect(old.textVectorizer).toBeDefined();
    const rows = old.textVectorizer!.transform(['w3a the w3c package']);
    const p = await old.predict(rows, { k: 2, workers: 0 });
    expect(p.probabilities).toBeUndefined();
    expect(old.labelNames![p.labels[0]!]).toBe('topic3');
    await expect(old.predict(rows, { threshold: 0.5, workers: 0 })).rejects.toThrow('Selection by threshold needs calibrated probabilities, and this network has none');
  });
});

describe('calibration on the other selection paths', () => {
  it('the refit copy (up to refitMaxPoints) and the k-fold folds (small data) each fit one, on points their weights never trained on', async () => {
    const refit = data(4000, 8);
    const a = new Network({ inputDim: refit.train.features, seed: 3, layers: [{ size: 32 }, { size: refit.train.labels }] });
    const sa = await fit(a, refit.train, { validation: { maxEpochs: 4, fraction: 0.1, refitMaxPoints: 20_000 }, workers: 2 });
    expect(sa.selection).toMatchObject({ method: 'holdout', refit: {} });
    expect(sa.selection!.method === 'holdout' && sa.selection!.calibration).toEqual(a.calibration);
    expect(sa.calibration).toMatchObject({ points: 400 });
    const small = data(1000, 9);
    const b = new Network({ inputDim: small.train.features, seed: 3, layers: [{ size: 32 }, { size: small.train.labels }] });
    const sb = await fit(b, small.train, { validation: { maxEpochs: 4 }, workers: 2 });
    expect(sb.selection?.method).toBe('kfold');
    // Every training point was scored once, by the fold that held it out.
    expect(sb.calibration).toMatchObject({ points: 1000 });
    expect(b.calibration).not.toBeNull();
    const c = new Network({ inputDim: small.train.features, seed: 3, layers: [{ size: 32 }, { size: small.train.labels }] });
    const sc = await fit(c, small.train, { epochs: 2, workers: 0 });
    expect(sc.calibration).toEqual({ skipped: 'no held-out points (validation is off)' });
    expect(c.calibration).toBeNull();
  }, 300_000);
});

describe('calibration of a raw-valued model', () => {
  it('is fitted on the held-out points as predict() sees them (divided by the input scaling once)', async () => {
    const d = data(4000, 10);
    const raw = { ...d.train, values: d.train.values.map((v) => 10 * v) };
    const net = new Network({ inputDim: raw.features, seed: 4, layers: [{ size: 32 }, { size: raw.labels }] });
    const validation = { maxEpochs: 2, fraction: 0.1 };
    const st = await fit(net, raw, { validation, workers: 2 });
    expect(st.inputScaling?.scaled).toBe(true);
    expect(st.selection?.method).toBe('holdout');
    const cal = net.calibration!;
    // The same fit on the seeded held-out slice of the raw data, predicted by predict() (which scales it).
    const v = resolveValidation(validation);
    const held = subset(raw, holdoutSplit(raw.points, v.fraction, v.maxPoints, net.seed).holdout);
    net.calibration = null;
    const pred = await net.predict(held, { k: cal.shortlist, workers: 0 });
    const again = fitCalibration(calibrationPairs(pred.labels, pred.scores, cal.shortlist, held), cal.shortlist);
    net.calibration = cal;
    expect(again.report.points).toBe(st.validationPoints);
    [...again.weights, again.bias, again.threshold].forEach((x, j) => expect(x, `parameter ${j}`).toBeCloseTo([...cal.weights, cal.bias, cal.threshold][j]!, 6));
  }, 300_000);
});
