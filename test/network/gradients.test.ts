// Mode-1 gradients equal central finite differences of the mode-2 loss, for every weight and bias of small
// networks (dense, two hidden layers, linear hidden, and sampled layers with fixed candidate sets).
import { describe, expect, it } from 'vitest';
import { native } from '../../src/native.js';
import type { LayerGrads, NetSpec } from '../../src/network/native-types.js';
import { fixedSampling, ids, makeNet, randomData, randomizeBiases } from './helpers.js';
import type { RefData } from './reference.js';

const H = { lr: 0, beta1: 0.9, beta2: 0.999, eps: 1e-8, seed: 3 };

function loss(net: NetSpec, data: RefData, pts: Uint32Array, gradScale: number): number {
  const s = new Float64Array(4);
  native().netTrainSlice(net, data, pts, { ...H, mode: 2, gradScale }, s);
  return s[0]! * gradScale;
}

function checkGradients(net: NetSpec, data: RefData, pts: Uint32Array): void {
  const gradScale = 0.5;
  const grads: LayerGrads[] = net.layers.map((l) => ({ weights: new Float32Array(l.weights.length), bias: new Float32Array(l.outDim) }));
  native().netTrainSlice(net, data, pts, { ...H, mode: 1, gradScale, grads }, new Float64Array(4));
  const eps = 1e-3;
  let checked = 0, nonzero = 0;
  const check = (arr: Float32Array, analytic: Float32Array, what: string) => {
    for (let i = 0; i < arr.length; i++) {
      const w = arr[i]!;
      arr[i] = w + eps;
      const hi = arr[i]!;
      const lp = loss(net, data, pts, gradScale);
      arr[i] = w - eps;
      const lo = arr[i]!;
      const lm = loss(net, data, pts, gradScale);
      arr[i] = w;
      const fd = (lp - lm) / (hi - lo);
      const g = analytic[i]!;
      expect(Math.abs(fd - g), `${what}[${i}]: fd ${fd} vs analytic ${g}`).toBeLessThanOrEqual(1e-2 * Math.abs(g) + 2e-4);
      checked++;
      if (Math.abs(g) > 1e-3) nonzero++;
    }
  };
  net.layers.forEach((l, k) => {
    check(l.weights, grads[k]!.weights, `layer ${k} weights`);
    check(l.bias, grads[k]!.bias, `layer ${k} bias`);
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
});
