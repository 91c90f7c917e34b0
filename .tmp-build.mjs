import { LshIndex } from './dist/src/lsh/index.js';
import { Xoshiro128 } from './dist/src/util/rng.js';
const N = 670091, D = 128;
const rng = new Xoshiro128(1);
const V = new Float32Array(N * D); for (let i = 0; i < V.length; i++) V[i] = rng.nextFloat() - 0.5;
const idx = new LshIndex({ family: 'dwta', K: 6, L: 50, dim: D, seed: 1 });
for (let r = 0; r < 3; r++) { const t = performance.now(); idx.build(V, N); console.log('build s', ((performance.now() - t) / 1000).toFixed(2)); }
