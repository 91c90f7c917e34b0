// Raw-valued inputs (src/network/input-scale.ts): detected from the training data, scaled per feature,
// kept in model files and checkpoints, and applied by predict(); files without the transform still load.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { SparseDataset } from '../../src/datasets/csr.js';
import { Network } from '../../src/network/network.js';
import { applyInputScale, detectInputScale, logCompress, looksLikeCounts } from '../../src/network/input-scale.js';
import { computeMetrics } from '../../src/network/metrics.js';
import { readBinFile, writeBinFile } from '../../src/util/binfile.js';
import { Xoshiro128 } from '../../src/util/rng.js';
import { toCsr } from './helpers.js';
import { fit, resume } from '../../src/train/fit-network.js';

const root = mkdtempSync(join(tmpdir(), 'sublinear-scale-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const D = 20, LABELS = 4;
/** Feature j's scale: 1e-3 .. 1e4, log-spaced. */
const SCALES = Array.from({ length: D }, (_, j) => 10 ** (-3 + (7 * j) / (D - 1)));

/**
 * Dense raw-valued data: feature j = u_j * SCALES[j] with u_j uniform in (0, 1); the label is the argmax
 * of u_0 .. u_3, the four smallest-scale features (1e-3 .. 1.5e-2); the others are noise up to 1e4.
 */
function rawData(points: number, seed: number): SparseDataset {
  const rng = new Xoshiro128(seed);
  const rows = [];
  for (let p = 0; p < points; p++) {
    const u = Array.from({ length: D }, () => 0.01 + 0.99 * rng.nextFloat());
    let best = 0;
    for (let j = 1; j < LABELS; j++) if (u[j]! > u[best]!) best = j;
    rows.push({ f: u.map((_, j) => j), v: u.map((x, j) => Math.fround(x * SCALES[j]!)), l: [best] });
  }
  return { ...toCsr(rows), features: D, labels: LABELS } as SparseDataset;
}

function binaryData(): SparseDataset {
  return { ...toCsr([{ f: [0, 2], v: [1, 1], l: [0] }, { f: [1], v: [1], l: [1] }]), features: 3, labels: 2 } as SparseDataset;
}

const p1 = async (net: Network, d: SparseDataset) => {
  const pred = await net.predict(d, { k: 1, workers: 0 });
  return computeMetrics({ topIdx: pred.labels, kMax: 1, labelOffsets: d.labelOffsets, labelIndices: d.labelIndices, ks: [1] }).p1!;
};

describe('detectInputScale', () => {
  it('leaves binary and unit-range data alone', () => {
    const r = detectInputScale(binaryData(), 3);
    expect(r.scale).toBeNull();
    expect(r.report).toEqual({
      scaled: false, method: 'none', maxAbs: 1, featureMaxAbs: [1, 1],
      reason: 'every value lies in [-1, 1] and the per-feature maxima span 1.00x (at most 10000x): inputs used as they are',
    });
  });

  it('scales values outside [-1, 1] by each feature\'s largest |value| (1 for features that never occur)', () => {
    const d = { ...toCsr([{ f: [0, 1], v: [-300, 0.5], l: [0] }, { f: [0], v: [150], l: [1] }]), features: 3, labels: 2 } as SparseDataset;
    const r = detectInputScale(d, 3);
    expect([...r.scale!]).toEqual([300, 0.5, 1]);
    expect(r.report.reason).toBe('raw-valued inputs, values outside [-1, 1] (largest |value| 300; per-feature maxima 0.500 .. 300): each feature divided by its largest |value| in the training data');
    const s = applyInputScale(d, r.scale!);
    expect([...s.values]).toEqual([-1, 1, 0.5]);
    expect(s.indices).toBe(d.indices);
    expect([...d.values]).toEqual([-300, 0.5, 150]); // the caller's data is untouched
  });

  it('scales features in [-1, 1] whose magnitudes span more than 10^4', () => {
    const d = { ...toCsr([{ f: [0, 1], v: [1e-5, 0.5], l: [0] }]), features: 2, labels: 1 } as SparseDataset;
    expect(detectInputScale(d, 2).report.reason).toBe('raw-valued inputs, per-feature maxima spanning 0.0000100 .. 0.500 (more than 10000x): each feature divided by its largest |value| in the training data');
  });

  it('follows inputScaling off and maxabs', () => {
    expect(detectInputScale(rawData(10, 1), D, 'off').scale).toBeNull();
    expect(detectInputScale(rawData(10, 1), D, 'off').report.reason).toBe('input scaling is off');
    expect(detectInputScale(binaryData(), 3, 'maxabs').scale).not.toBeNull();
  });
});

describe('training on raw-valued inputs', () => {
  const train = rawData(1000, 7), test = rawData(400, 8);
  const config = { inputDim: D, seed: 1, layers: [{ size: 64 }, { size: LABELS }] };
  const opts = { epochs: 30, workers: 0, lr: 1e-2 } as const;
  let scaled: Network | undefined;
  const trainedScaled = async () => {
    if (!scaled) {
      scaled = new Network(config);
      const st = await fit(scaled, train, opts);
      expect(st.inputScaling?.scaled).toBe(true);
    }
    return scaled;
  };

  it('learns when the inputs are scaled and does much worse unscaled', async () => {
    const net = await trainedScaled();
    expect([...net.inputScale!].every((s, j) => s <= SCALES[j]! && s > 0.9 * SCALES[j]!)).toBe(true);
    const off = new Network(config);
    const st = await fit(off, train, { ...opts, inputScaling: 'off' });
    expect(st.inputScaling).toEqual(expect.objectContaining({ scaled: false, reason: 'input scaling is off' }));
    expect(off.inputScale).toBeNull();
    const withScale = await p1(net, test), without = await p1(off, test);
    // Observed: 0.943 scaled, 0.278 unscaled (chance 0.25).
    expect(withScale).toBeGreaterThan(0.85);
    expect(without).toBeLessThan(withScale - 0.3);
  });

  it('a saved and loaded model applies the same transform to raw inputs', async () => {
    const net = await trainedScaled();
    const path = join(root, 'raw.sl');
    await net.save(path);
    const loaded = await Network.load(path);
    expect(loaded.inputScale).toEqual(net.inputScale);
    const a = await net.predict(test, { k: 2, workers: 0 }), b = await loaded.predict(test, { k: 2, workers: 0 });
    expect(b.labels).toEqual(a.labels);
    expect(b.scores).toEqual(a.scores);
    // Without the transform the same weights predict differently (and badly): predict() really applies it.
    loaded.inputScale = null;
    expect(await p1(loaded, test)).toBeLessThan((await p1(net, test)) - 0.3);
  });

  it('a later fit() keeps the transform of the first', async () => {
    const net = new Network(config);
    await fit(net, train, { ...opts, epochs: 1 });
    const first = net.inputScale!.slice();
    const st = await fit(net, { ...train, values: train.values.map((v) => v * 2) }, { ...opts, epochs: 1 });
    expect(net.inputScale).toEqual(first);
    expect(st.inputScaling?.reason).toBe('the network\'s stored input scaling (decided by its first training) is applied');
  });

  it('checkpoints keep the transform: a resumed run goes on with it', async () => {
    const dir = join(root, 'ckpt');
    const net = new Network(config);
    const ac = new AbortController();
    await fit(net, train, { ...opts, epochs: 3, signal: ac.signal, checkpoint: { dir, every: 8, onSaved: () => ac.abort() } });
    const resumed = await resume(dir);
    expect(resumed.inputScale).toEqual(net.inputScale);
    const st = await fit(resumed, train);
    expect(st.inputScaling?.scaled).toBe(true);
  });

  it('model files without the transform (written before it existed) load and use the inputs as they are', async () => {
    const net = await trainedScaled();
    const path = join(root, 'old.sl');
    await net.save(path);
    // The file as sublinear wrote it before input scaling existed: the same sections but inputScale.
    const f = await readBinFile(path);
    expect(Object.keys(f.sections)).toContain('inputScale');
    const { inputScale: _dropped, ...sections } = f.sections;
    await writeBinFile(path, { kind: f.kind, meta: f.meta, sections });
    const old = await Network.load(path);
    expect(old.inputScale).toBeNull();
    await net.save(join(root, 'ref.sl'));
    const ref = await Network.load(join(root, 'ref.sl'));
    ref.inputScale = null; // the same weights, fed the raw inputs
    expect(ref.inputScale).toBeNull();
    const want = await ref.predict(test, { k: 2, workers: 0 });
    expect((await old.predict(test, { k: 2, workers: 0 })).labels).toEqual(want.labels);
    // And an unscaled network's file has no such section at all.
    const plain = new Network({ inputDim: 3, seed: 1, layers: [{ size: 4 }, { size: 2 }] });
    await fit(plain, binaryData(), { epochs: 1, workers: 0 });
    await plain.save(join(root, 'plain.sl'));
    expect(Object.keys((await readBinFile(join(root, 'plain.sl'))).sections)).not.toContain('inputScale');
    expect((await Network.load(join(root, 'plain.sl'))).inputScale).toBeNull();
  });

  it('refuses a stored transform with an invalid divisor, naming the file and the entry', async () => {
    const net = await trainedScaled();
    const path = join(root, 'bad.sl');
    await net.save(path);
    const f = await readBinFile(path);
    const s = (f.sections['inputScale'] as Float32Array).slice();
    s[3] = 0;
    await writeBinFile(path, { kind: f.kind, meta: f.meta, sections: { ...f.sections, inputScale: s } });
    await expect(Network.load(path)).rejects.toThrow(`${path}: section "inputScale" holds an invalid divisor (0) at index 3`);
  });
});

/**
 * Bag-of-words counts: label l's topic words are features 5l .. 5l+4, features 20 .. 39 are noise words
 * shared by all labels. A point holds 2 of its label's topic words and 6 noise words, each 1 to 3 times;
 * with `outliers`, the first point of each topic word repeats it 200 times (a text that repeats one
 * word), which makes that word's largest count 200 while its usual count stays 1 to 3.
 */
function countData(points: number, seed: number, outliers: boolean): SparseDataset {
  const rng = new Xoshiro128(seed);
  const rows = [];
  const repeated = new Set<number>();
  for (let p = 0; p < points; p++) {
    const l = p % 4;
    const words = new Map<number, number>();
    while (words.size < 2) words.set(5 * l + rng.below(5), 1 + rng.below(3));
    while (words.size < 8) words.set(20 + rng.below(20), 1 + rng.below(3));
    if (outliers) {
      for (const w of words.keys()) {
        if (w < 20 && !repeated.has(w)) {
          repeated.add(w);
          words.set(w, 200);
        }
      }
    }
    const f = [...words.keys()].sort((a, b) => a - b);
    rows.push({ f, v: f.map((w) => words.get(w)!), l: [l] });
  }
  return { ...toCsr(rows), features: 40, labels: 4 } as SparseDataset;
}

describe('term counts', () => {
  it('looksLikeCounts: non-negative integers with some above 1; logCompress is the identity on [-1, 1]', () => {
    expect(looksLikeCounts(countData(8, 1, false))).toBe(true);
    expect(looksLikeCounts(binaryData())).toBe(false); // nothing above 1
    const frac = countData(8, 1, false);
    expect(looksLikeCounts({ ...frac, values: frac.values.map((v, e) => (e === 3 ? v + 0.5 : v)) })).toBe(false);
    expect(looksLikeCounts({ ...frac, values: frac.values.map((v, e) => (e === 3 ? -v : v)) })).toBe(false);
    expect([0, 0.5, 1, -1, -0.25].map(logCompress)).toEqual([0, 0.5, 1, -1, -0.25]);
    expect(logCompress(2)).toBeCloseTo(1 + Math.log(2), 12);
    expect(logCompress(100)).toBeCloseTo(5.60517, 5);
    expect(logCompress(-100)).toBeCloseTo(-5.60517, 5);
  });

  it('are compressed, not divided per feature: a word seen once stays 1, whatever its largest count', () => {
    const d = { ...toCsr([{ f: [0, 1], v: [1, 3], l: [0] }, { f: [0, 2], v: [13, 1], l: [1] }]), features: 4, labels: 2 } as SparseDataset;
    const r = detectInputScale(d, 4);
    expect(r.log).toBe(true);
    expect(r.scale).toBeNull();
    expect(r.report).toEqual({
      scaled: true, method: 'log', maxAbs: 13, featureMaxAbs: [1, 13],
      reason: 'term counts (non-negative integers up to 13.0): each count n > 1 replaced by 1 + ln n',
    });
    const s = applyInputScale(d, null, true);
    expect([...s.values]).toEqual([1, 1 + Math.log(3), 1 + Math.log(13), 1].map(Math.fround));
    expect([...d.values]).toEqual([1, 3, 13, 1]); // the caller's data is untouched
    // A fractional value anywhere: raw measurements, divided per feature as before; 'log' and 'maxabs' force either.
    const raw = { ...d, values: Float32Array.from([1, 3, 12.5, 1]) };
    expect(detectInputScale(raw, 4)).toMatchObject({ log: false, report: { method: 'maxabs' } });
    expect(detectInputScale(raw, 4, 'log')).toMatchObject({ log: true, scale: null, report: { method: 'log', reason: 'inputScaling log: every value beyond +-1 replaced by +-(1 + ln |value|)' } });
    expect(detectInputScale(d, 4, 'maxabs')).toMatchObject({ log: false, report: { method: 'maxabs' } });
    expect(detectInputScale(d, 4, 'off')).toMatchObject({ log: false, scale: null, report: { method: 'none' } });
  });

  describe('training on counts', () => {
    const train = countData(400, 11, true), test = countData(200, 12, false);
    const config = { inputDim: 40, seed: 1, layers: [{ size: 32 }, { size: 4 }] };
    const opts = { epochs: 15, workers: 0, lr: 1e-2 } as const;
    let counted: Network | undefined;
    const trained = async () => {
      if (!counted) {
        counted = new Network(config);
        const st = await fit(counted, train, opts);
        expect(st.inputScaling).toMatchObject({ scaled: true, method: 'log' });
      }
      return counted;
    };

    it('learns the topic words that per-feature division shrinks to 1/200 of the noise words', async () => {
      const net = await trained();
      expect(net.inputLog).toBe(true);
      expect(net.inputScale).toBeNull();
      const divided = new Network(config);
      await fit(divided, train, { ...opts, inputScaling: 'maxabs' });
      const withLog = await p1(net, test), withMaxabs = await p1(divided, test);
      // Observed: 1.00 compressed, 0.26 divided (chance 0.25).
      expect(withLog).toBeGreaterThan(0.9);
      expect(withMaxabs).toBeLessThan(withLog - 0.2);
    });

    it('model files and checkpoints keep the compression; predict applies it', async () => {
      const net = await trained();
      const path = join(root, 'counts.sl');
      await net.save(path);
      expect(Object.keys((await readBinFile(path)).sections)).toContain('inputLog');
      const loaded = await Network.load(path);
      expect(loaded.inputLog).toBe(true);
      const a = await net.predict(test, { k: 2, workers: 0 }), b = await loaded.predict(test, { k: 2, workers: 0 });
      expect(b.scores).toEqual(a.scores);
      loaded.inputLog = false; // the same weights fed the raw counts score differently
      expect((await loaded.predict(test, { k: 2, workers: 0 })).scores).not.toEqual(a.scores);
      const dir = join(root, 'ckpt-counts');
      const c = new Network(config);
      const ac = new AbortController();
      await fit(c, train, { ...opts, epochs: 3, signal: ac.signal, checkpoint: { dir, every: 4, onSaved: () => ac.abort() } });
      const resumed = await resume(dir);
      expect(resumed.inputLog).toBe(true);
      const st = await fit(resumed, train);
      expect(st.inputScaling).toMatchObject({ scaled: true, method: 'log', maxAbs: 200 });
    });

    it('refuses a damaged inputLog section, naming the file', async () => {
      const net = await trained();
      const path = join(root, 'bad-log.sl');
      await net.save(path);
      const f = await readBinFile(path);
      await writeBinFile(path, { kind: f.kind, meta: f.meta, sections: { ...f.sections, inputLog: Uint8Array.of(2) } });
      await expect(Network.load(path)).rejects.toThrow(`${path}: section "inputLog" must hold the one byte 1 but holds 1 byte(s) starting with 2`);
    });
  });
});
