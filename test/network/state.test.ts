// The network's initial weights (src/network/state.ts): the Glorot draw, filled natively (netGlorotFill),
// against the JavaScript loop it replaced, number for number.
import { describe, expect, it } from 'vitest';
import { native } from '../../src/native/addon.js';
import { allocateLayers, initSeed } from '../../src/network/state.js';
import { Xoshiro128 } from '../../src/util/rng.js';

/** The reference: n weights (2 u - 1) x limit from the stream of `rng`, each rounded to float. */
function reference(rng: Xoshiro128, n: number, limit: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = (2 * rng.nextFloat() - 1) * limit;
  return out;
}

describe('Glorot initialisation', () => {
  it('netGlorotFill continues a Xoshiro128 stream as nextFloat() does, bit for bit', () => {
    for (const seed of [0n, 7n, 123456789n]) {
      const rng = new Xoshiro128(seed);
      for (let i = 0; i < 5; i++) rng.nextU32(); // mid-stream: the words carry the state on
      const words = rng.words();
      const got = new Float32Array(10_001);
      native().netGlorotFill(got, words, 0.37);
      expect(got).toEqual(reference(rng, got.length, 0.37));
    }
  });

  it('allocateLayers draws each layer from its own seeded stream within +-sqrt(6 / (in + out))', () => {
    const layers = allocateLayers({ inputDim: 37, seed: 11, layers: [{ size: 19, activation: 'relu' }, { size: 5, activation: 'softmax' }] });
    let inDim = 37;
    layers.forEach((l, k) => {
      const limit = Math.sqrt(6 / (inDim + l.outDim));
      expect(l.weights).toEqual(reference(new Xoshiro128(initSeed(11, k)), inDim * l.outDim, limit));
      let lo = Infinity, hi = -Infinity;
      for (const w of l.weights) (lo = Math.min(lo, w)), (hi = Math.max(hi, w));
      expect(hi).toBeLessThanOrEqual(limit);
      expect(lo).toBeGreaterThanOrEqual(-limit);
      expect(hi - lo).toBeGreaterThan(limit); // spread over the range, not a constant
      inDim = l.outDim;
    });
  });

  it('refuses a state of the wrong length', () => {
    expect(() => native().netGlorotFill(new Float32Array(4), new Uint32Array(3), 1)).toThrow('state must hold 4 words');
  });
});
