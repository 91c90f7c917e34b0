import { describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { anchorMissing, findPython, ovrTooLarge, parseNapkinPredictions, parseOmikujiPredictions, runAnchor, scoreTop5 } from '../../bench/anchors.js';
import { writeXC } from '../../src/datasets/index.js';
import { NO_PREDICTION } from '../../src/network/metrics.js';
import { CsrBuilder } from '../../src/datasets/csr-builder.js';

const N = NO_PREDICTION;

describe('parseOmikujiPredictions', () => {
  it('reads `label score` items separated by tabs, best first, padding short lines', () => {
    const text = '3 0.912\t7 0.100\t1 0.050\n\n12 1.000\t4 -0.250\n';
    expect(Array.from(parseOmikujiPredictions(text, 3, 2))).toEqual([3, 7, N, N, 12, 4]);
  });

  it('names the line of a malformed item and checks the line count', () => {
    expect(() => parseOmikujiPredictions('3 0.9\t7:0.1\n', 1, 5)).toThrow("omikuji predictions, line 1: expected 'label score' but found '7:0.1'");
    expect(() => parseOmikujiPredictions('3 0.9\n', 2, 5)).toThrow('omikuji predictions: 1 prediction lines for 2 test points');
  });
});

describe('parseNapkinPredictions', () => {
  it("reads `label:score ` items (napkinXC's trailing space included)", () => {
    const text = '5:0.9 2:0.5 8:0.25 \n\n0:1e-3 \n';
    expect(Array.from(parseNapkinPredictions(text, 3, 2))).toEqual([5, 2, N, N, 0, N]);
  });

  it('names the line of a malformed item', () => {
    expect(() => parseNapkinPredictions('5:0.9\nx:1 \n', 2, 5)).toThrow("napkinXC predictions, line 2: expected 'label:score' but found 'x:1'");
    expect(() => parseNapkinPredictions('5:\n', 1, 5, 'PECOS predictions')).toThrow("PECOS predictions, line 1: expected 'label:score' but found '5:'");
  });
});

describe('scoreTop5', () => {
  it('computes P@1/3/5 with label-less points counting as misses', () => {
    const b = new CsrBuilder(3, 3, 4);
    b.addRow([1, 2], 0, 2, [0], [1], 0, 1);
    b.addRow([4], 0, 1, [1], [1], 0, 1);
    b.addRow([], 0, 0, [2], [1], 0, 1);
    const test = b.toDataset(3, 6);
    const top = Uint32Array.from([1, 0, 2, N, N, /**/ 0, 4, 3, 5, N, /**/ 1, 2, 3, 4, 5]);
    const m = scoreTop5(top, test);
    expect(m.p1).toBeCloseTo(1 / 3, 10);
    expect(m.p3).toBeCloseTo((2 / 3 + 1 / 3) / 3, 10);
    expect(m.p5).toBeCloseTo((2 / 5 + 1 / 5) / 3, 10);
  });
});

describe('one-vs-rest logistic regression', () => {
  it('runs only up to OVR_MAX_COST labels x training points, saying why not beyond', () => {
    expect(ovrTooLarge(1000, 600)).toBeNull();
    expect(ovrTooLarge(12920, 983)).toBe('one classifier per label over every training point: 983 labels x 12,920 points is over 2,000,000');
  });

  // The helper itself needs a Python with scikit-learn (bench:accuracy skips the system without one).
  const python = findPython(['python3']);
  it.skipIf(anchorMissing('ovr-lr', python) !== null)('trains one classifier per label and ranks by decision value (a Python with scikit-learn)', async () => {
    // 3 labels, each on the rows holding its own feature (5 of 6 points), plus a shared feature; a label never seen (3).
    const b = new CsrBuilder(12, 24, 12);
    for (let i = 0; i < 12; i++) b.addRow([i % 3], 0, 1, [i % 3, 5], [2, 1], 0, 2);
    const data = b.toDataset(6, 4);
    const work = mkdtempSync(join(tmpdir(), 'sublinear-ovr-'));
    try {
      const file = join(work, 'd.txt');
      await writeXC(file, data);
      const r = await runAnchor('ovr-lr', { train: file, test: file, testData: data, work, threads: 1, python, verbose: false });
      expect(r).toMatchObject({ name: 'one-vs-rest LR', p1: 1 });
      expect(r.trainSeconds).toBeGreaterThan(0);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
});
