// Mode-1 gradients equal central finite differences of the mode-2 loss, for every weight and bias of small
// networks (dense, two hidden layers, linear hidden, and sampled layers with fixed candidate sets).
import { describe, expect, it } from 'vitest';
import { native } from '../../src/native/addon.js';
import type { LayerGrads, NetSpec } from '../../src/native/network-types.js';
import { checkFiniteDifferences, FD_HYPER, sliceLoss, fixedSampling, ids, makeNet, randomData, randomizeBiases } from './helpers.js';
import type { RefData } from './reference.js';

const H = FD_HYPER;

function checkGradients(net: NetSpec, data: RefData, pts: Uint32Array): void {
  const gradScale = 0.5;
  const grads: LayerGrads[] = net.layers.map((l) => ({ weights: new Float32Array(l.weights.length), bias: new Float32Array(l.outDim) }));
  native().netTrainSlice(net, data, pts, { ...H, mode: 1, gradScale, grads }, new Float64Array(4));
  let checked = 0, nonzero = 0;
  const lossNow = () => sliceLoss(net, data, pts, gradScale);
  net.layers.forEach((l, k) => {
    nonzero += checkFiniteDifferences(l.weights, grads[k]!.weights, lossNow, `layer ${k} weights`);
    nonzero += checkFiniteDifferences(l.bias, grads[k]!.bias, lossNow, `layer ${k} bias`);
    checked += l.weights.length + l.bias.length;
  });
  // The check is meaningful only if many gradients are clearly non-zero.
  expect(nonzero).toBeGreaterThan(checked / 4);
}

describe('gradients match finite differences of the loss', () => {
  const data = randomData(8, 10, 7, 101, { labelCounts: [1, 2, 3, 0] });

  it('10 -> 6 -> 7 relu', () => {
    const net = makeNet(10, [6, 7], 102);
    randomizeBiases(net, 103);
    checkGradients(net, data, ids(8));
  });

  it('10 -> 6 -> 5 -> 7 relu (two hidden layers)', () => {
    const net = makeNet(10, [6, 5, 7], 104);
    randomizeBiases(net, 105);
    checkGradients(net, data, ids(8));
  });

  it('10 -> 6 -> 5 -> 7 linear hidden', () => {
    const net = makeNet(10, [6, 5, 7], 106, 'linear');
    checkGradients(net, data, Uint32Array.of(7, 2, 5, 1));
  });

  it('10 -> 7 single softmax layer', () => {
    checkGradients(makeNet(10, [7], 107), data, ids(8));
  });

  it('sampled hidden and output layers with fixed candidate sets', () => {
    const net = makeNet(10, [6, 9, 7], 108);
    randomizeBiases(net, 109);
    net.layers[1]!.sampling = fixedSampling(6, 9, [0, 2, 3, 7, 8]);
    net.layers[2]!.sampling = fixedSampling(9, 7, [1, 4]);
    checkGradients(net, data, ids(8));
  });

  // Dropout masks are drawn from the slice seed, so the loss (mode 2) and the gradients (mode 1) of one
  // seed see the same mask and finite differences apply.
  it('dropout on both hidden layers (relu), and on a linear hidden layer', () => {
    const net = makeNet(10, [12, 10, 7], 110);
    randomizeBiases(net, 111);
    net.layers[0]!.dropout = 0.4;
    net.layers[1]!.dropout = 0.3;
    checkGradients(net, data, ids(8));
    const lin = makeNet(10, [12, 10, 7], 112, 'linear');
    lin.layers[0]!.dropout = 0.5;
    lin.layers[1]!.dropout = 0.5;
    checkGradients(lin, data, Uint32Array.of(7, 2, 5, 1));
  });
});

describe('dropout', () => {
  const data = randomData(16, 10, 7, 121, { labelCounts: [1, 2] });
  const lossOf = (net: NetSpec, seed: number) => {
    const s = new Float64Array(4);
    native().netTrainSlice(net, data, ids(16), { ...H, seed, mode: 2, gradScale: 1 }, s);
    return s[0]!;
  };
  it('changes the training loss (a mask per seed), never prediction; 0 is no dropout', () => {
    const net = makeNet(10, [64, 7], 122);
    randomizeBiases(net, 123);
    const plain = lossOf(net, 3);
    const predict = () => {
      const idx = new Uint32Array(16 * 3), val = new Float32Array(16 * 3);
      native().netPredictSlice(net, data, ids(16), 3, 0, idx, val);
      return [Array.from(idx), Array.from(val)];
    };
    const before = predict();
    net.layers[0]!.dropout = 0;
    expect(lossOf(net, 3)).toBe(plain);
    net.layers[0]!.dropout = 0.5;
    const a = lossOf(net, 3), b = lossOf(net, 4);
    expect(a).not.toBe(plain);
    expect(a).not.toBe(b);
    expect(lossOf(net, 3)).toBe(a);
    expect(predict()).toEqual(before);
  });
  it('keeps about 1 - p of the units (the gradient reaches only those), all scaled by one factor', () => {
    // The output layer's weight gradient for one sample is dz_j * A (the hidden outputs after dropout): its
    // non-zero entries are the kept units, each 1 / (1 - p) times the gradient without dropout.
    const net = makeNet(10, [400, 2], 124, 'linear');
    randomizeBiases(net, 126);
    const one = randomData(1, 10, 2, 125, { labelCounts: [1] });
    const gradOf = (seed: number) => {
      const grads: LayerGrads[] = net.layers.map((l) => ({ weights: new Float32Array(l.weights.length), bias: new Float32Array(l.outDim) }));
      native().netTrainSlice(net, one, ids(1), { ...H, seed, mode: 1, gradScale: 1, grads }, new Float64Array(4));
      return grads[1]!.weights.subarray(0, 400);
    };
    const full = gradOf(1);
    net.layers[0]!.dropout = 0.25;
    const fullAt = (s: number) => gradOf(s);
    let kept = 0, total = 0;
    for (const seed of [3, 4, 5, 6, 7]) {
      const g = fullAt(seed);
      // dz changes with the mask, so compare ratios within the sample: kept units share one factor.
      const ratios: number[] = [];
      for (let i = 0; i < 400; i++) {
        if (full[i] === 0) continue;
        total++;
        if (g[i] !== 0) {
          kept++;
          ratios.push(g[i]! / full[i]!);
        }
      }
      const r0 = ratios[0]!;
      for (const r of ratios) expect(Math.abs(r - r0)).toBeLessThan(1e-3 * Math.abs(r0));
    }
    expect(kept / total).toBeGreaterThan(0.7);
    expect(kept / total).toBeLessThan(0.8);
  });
});
