// sharedSetLogQ: q_j must be the probability that label j is in a batch's shared set S (the batch's
// labels plus a uniform fill up to minActive). Checked against a simulation of the batches.
import { describe, expect, it } from 'vitest';
import { sharedSetLogQ } from '../../src/train/logq.js';
import { Xoshiro128 } from '../../src/util/rng.js';

describe('sharedSetLogQ', () => {
  it('matches the inclusion frequency of simulated shared sets', () => {
    const rng = new Xoshiro128(5);
    const N = 400, points = 2000, batch = 32, minActive = 120;
    // A Zipf-like label assignment: one label per point.
    const labelOf = Uint32Array.from({ length: points }, () => Math.min(N - 1, Math.floor(Math.exp(rng.nextFloat() * Math.log(N))) - 1));
    const freq = new Uint32Array(N);
    for (const l of labelOf) freq[l]++;
    const logQ = sharedSetLogQ(freq, points, batch, minActive);
    expect(logQ.buffer).toBeInstanceOf(SharedArrayBuffer);
    const trials = 4000;
    const hits = new Float64Array(N);
    for (let t = 0; t < trials; t++) {
      const S = new Set<number>();
      for (let i = 0; i < batch; i++) S.add(labelOf[rng.below(points)]!);
      while (S.size < minActive) S.add(rng.below(N));
      for (const j of S) hits[j]!++;
    }
    let checked = 0;
    for (let j = 0; j < N; j++) {
      const q = Math.exp(-logQ[j]!), emp = hits[j]! / trials;
      // Binomial standard error plus a little for the independence approximation of the formula.
      expect(Math.abs(q - emp), `label ${j} (count ${freq[j]}): q ${q} vs ${emp}`).toBeLessThan(4 * Math.sqrt(emp * (1 - emp) / trials) + 0.02);
      checked++;
    }
    expect(checked).toBe(N);
    // Frequent labels are nearly always in S; unseen ones only through the fill.
    const top = freq.indexOf(Math.max(...freq));
    expect(Math.exp(-logQ[top]!)).toBeGreaterThan(0.9);
  });
});
