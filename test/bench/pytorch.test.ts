import { describe, expect, it } from 'vitest';
import { pytorchAvailable, trainPytorch } from '../../bench/baselines/pytorch.js';
import { tinyProblem } from './tiny-problem.js';

const avail = pytorchAvailable();
if (!avail.ok) console.warn(`[pytorch baseline tests skipped] ${avail.reason}`);

describe('pytorch availability check', () => {
  it('reports a missing interpreter as "not installed" instead of throwing', () => {
    const r = pytorchAvailable('/nonexistent/python3');
    expect(r.ok).toBe(false);
    expect(r.reason).toMatch(/not installed/);
  });
});

describe.skipIf(!avail.ok)(`pytorch dense baseline${avail.ok ? '' : ` — SKIPPED: ${avail.reason}`}`, () => {
  it('learns a tiny problem and reports progress records', async () => {
    const train = tinyProblem(600, 1), test = tinyProblem(200, 2);
    const records: { p1: number; seconds: number }[] = [];
    const r = await trainPytorch({
      train, test, hidden: [16], epochs: 4, batchSize: 32, lr: 1e-2, seed: 5, threads: 1,
      evalEvery: 19, evalPoints: 200, onEval: (e) => records.push(e),
    });
    expect(r.system).toBe('pytorch');
    expect(r.diverged).toBe(false);
    expect(r.batches).toBe(4 * Math.ceil(600 / 32));
    expect(r.samples).toBe(4 * 600);
    expect(r.samplesPerSec).toBeGreaterThan(0);
    expect(r.peakRssBytes).toBeGreaterThan(0);
    expect(r.batchSeconds.length).toBe(r.batches);
    expect(r.batchSeconds.reduce((a, b) => a + b, 0)).toBeCloseTo(r.seconds, 6);
    expect(records[0]!.seconds).toBe(0);
    expect(records.length).toBe(r.curve.length);
    expect(r.finalP1).toBeGreaterThan(0.8);
    expect(r.finalP1).toBeGreaterThan(records[0]!.p1 + 0.3);
    expect(r.info.threads).toBe(1);
  });
});
