// SimHash is locality sensitive for the angle: two vectors at angle theta agree on a sign bit with
// probability 1 - theta / pi. Our projections are sparse +-1 (density 1/3, as SLIDE), not Gaussian, so the
// law holds approximately; we check it per bit over many random pairs and projections.
import { describe, expect, it } from 'vitest';
import { native } from '../../src/native/addon.js';
import { generateHashSpec } from '../../src/lsh/index.js';
import { Xoshiro128 } from '../../src/util/rng.js';

/** A pair of random unit vectors at angle theta (dense Gaussian directions). */
function pairAtAngle(dim: number, theta: number, rng: Xoshiro128): [Float32Array, Float32Array] {
  const u = Array.from({ length: dim }, () => rng.normal());
  const nu = Math.hypot(...u);
  const w = Array.from({ length: dim }, () => rng.normal());
  const dot = w.reduce((s, v, i) => s + v * u[i]!, 0) / nu;
  const p = w.map((v, i) => v - (dot * u[i]!) / nu); // orthogonal to u
  const np = Math.hypot(...p);
  const x = Float32Array.from(u, (v) => v / nu);
  const y = Float32Array.from(u, (v, i) => Math.cos(theta) * (v / nu) + Math.sin(theta) * (p[i]! / np));
  return [x, y];
}

describe('simhash collision probability', () => {
  const dim = 64, L = 1024, pairs = 60;
  it.each([
    [Math.PI / 8],
    [Math.PI / 4],
    [Math.PI / 2],
    [(3 * Math.PI) / 4],
  ])('angle %f: per-bit agreement ~ 1 - theta / pi', (theta) => {
    // K = 1, rangeBits 1: each table's key is one projection's bit.
    const spec = generateHashSpec({ family: 'simhash', K: 1, L, dim, seed: 31 });
    const rng = new Xoshiro128(7 + Math.round(theta * 1000));
    let agree = 0;
    const kx = new Uint32Array(L), ky = new Uint32Array(L);
    for (let i = 0; i < pairs; i++) {
      const [x, y] = pairAtAngle(dim, theta, rng);
      native().lshHashDense(spec, x, 1, 0, L, kx);
      native().lshHashDense(spec, y, 1, 0, L, ky);
      for (let t = 0; t < L; t++) if (kx[t] === ky[t]) agree++;
    }
    const observed = agree / (pairs * L);
    // 61k bit comparisons (sampling std < 0.002). Observed: 0.8757 / 0.7486 / 0.4976 / 0.2502 for expected
    // 0.875 / 0.75 / 0.5 / 0.25 (max deviation 0.0024); the tolerance leaves room for the sparse +-1 projections.
    expect(Math.abs(observed - (1 - theta / Math.PI))).toBeLessThan(0.01);
  });
});
