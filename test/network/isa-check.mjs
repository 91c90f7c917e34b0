// Child process of isa.test.ts (and arm64.test.ts): trains and predicts with a tiny network using the raw addon, under the
// block-kernel ISA selected by SUBLINEAR_BLOCK_ISA, and prints the results as JSON.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
// SUBLINEAR_ADDON: another build of the addon (test/package/arm64.test.ts runs this under qemu-aarch64).
const addon = require(process.env.SUBLINEAR_ADDON || '../../build/Release/sublinear.node');

// Deterministic tiny problem (LCG), shapes that exercise row-block tails (R = 1..3) and padded samples.
let state = 12345;
const rnd = () => ((state = (Math.imul(state, 1103515245) + 12345) >>> 0) / 4294967296);
const D = 50, H1 = 23, H2 = 19, O = 31, N = 37;
const layer = (inDim, outDim, act, inputMajor) => {
  const w = new Float32Array(inDim * outDim).map(() => (rnd() - 0.5) * 0.6);
  return {
    inDim, outDim, activation: act, inputMajor, weights: w, bias: new Float32Array(outDim).map(() => (rnd() - 0.5) * 0.2),
    mWeights: new Float32Array(w.length), vWeights: new Float32Array(w.length), mBias: new Float32Array(outDim),
    vBias: new Float32Array(outDim), rowSteps: new Uint32Array(inputMajor ? inDim : outDim), biasSteps: new Uint32Array(1),
  };
};
const net = { layers: [layer(D, H1, 0, 1), layer(H1, H2, 0, 0), layer(H2, O, 1, 0)] };
const offsets = [0], indices = [], values = [], labelOffsets = [0], labelIndices = [];
for (let p = 0; p < N; p++) {
  const fs = new Set();
  while (fs.size < 5) fs.add(Math.floor(rnd() * D));
  for (const f of [...fs].sort((a, b) => a - b)) { indices.push(f); values.push(0.5 + rnd()); }
  const ls = new Set();
  while (ls.size < 1 + (p % 3)) ls.add(Math.floor(rnd() * O));
  labelIndices.push(...[...ls].sort((a, b) => a - b));
  offsets.push(indices.length);
  labelOffsets.push(labelIndices.length);
}
const data = {
  points: N, offsets: Uint32Array.from(offsets), indices: Uint32Array.from(indices), values: Float32Array.from(values),
  labelOffsets: Uint32Array.from(labelOffsets), labelIndices: Uint32Array.from(labelIndices),
};
const all = Uint32Array.from({ length: N }, (_, i) => i);
const stats = new Float64Array(4);
const losses = [];
for (let e = 0; e < 3; e++) {
  addon.netTrainSlice(net, data, all, { mode: 0, lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8, gradScale: 1 / N, seed: e }, stats);
  losses.push(stats[0]);
}
const k = 4;
const idx = new Uint32Array(N * k), val = new Float32Array(N * k);
addon.netPredictSlice(net, data, all, k, 0, idx, val);
console.log(JSON.stringify({
  isa: addon.netKernelIsa, losses, idx: Array.from(idx), val: Array.from(val),
  weights: net.layers.map((l) => Array.from(l.weights)),
}));
