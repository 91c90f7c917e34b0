// Malformed arguments become JS exceptions with clear messages (the addon never aborts), and a failed call
// leaves the network untouched.
import { describe, expect, it } from 'vitest';
import { native } from '../../src/native/addon.js';
import type { NetSpec, TrainHyper } from '../../src/native/network-types.js';
import { fixedSampling, ids, makeNet, randomData, snapshot } from './helpers.js';
import type { RefData } from './reference.js';

const HYPER: TrainHyper = { mode: 0, lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8, gradScale: 0.25, seed: 1 };

function trainCall(net: unknown, data: unknown, pts: unknown = ids(4), hyper: unknown = HYPER, stats: unknown = new Float64Array(4)) {
  return () =>
    native().netTrainSlice(net as NetSpec, data as RefData, pts as Uint32Array, hyper as TrainHyper, stats as Float64Array);
}

describe('netTrainSlice rejects bad input', () => {
  const data = randomData(6, 30, 12, 301);
  const fresh = () => makeNet(30, [8, 12], 302);

  it('wrong array lengths and types', () => {
    const net = fresh();
    net.layers[1]!.weights = net.layers[1]!.weights.subarray(1);
    expect(trainCall(net, data)).toThrow(/sublinear native: net\.layers\[1\]: weights has 95 elements, expected inDim \* outDim = 96/);
    const n2 = fresh();
    (n2.layers[0] as { rowSteps: unknown }).rowSteps = new Float32Array(30);
    expect(trainCall(n2, data)).toThrow(/net\.layers\[0\]: Expected Uint32Array for rowSteps/);
    const n3 = fresh();
    n3.layers[1]!.bias = new Float32Array(11);
    expect(trainCall(n3, data)).toThrow(/bias has 11 elements, expected outDim = 12/);
    expect(trainCall(fresh(), data, ids(4), HYPER, new Float64Array(3))).toThrow(/outStats is too short/);
    expect(trainCall(fresh(), data, [0, 1])).toThrow(/Expected Uint32Array for pointIds/);
    expect(trainCall(fresh(), { ...data, offsets: data.offsets.subarray(0, 3) })).toThrow(/data: offsets is too short/);
  });

  it('inconsistent layers', () => {
    const net = fresh();
    const other = makeNet(30, [9, 12], 303);
    net.layers[1] = other.layers[1]!;
    expect(trainCall(net, data)).toThrow(/inDim = 9 differs from the previous layer's outDim 8/);
    const n2 = fresh();
    n2.layers[1]!.activation = 0;
    expect(trainCall(n2, data)).toThrow(/must be 1 \(softmax\) on the last layer/);
    const n3 = fresh();
    n3.layers[0]!.inputMajor = 0;
    expect(trainCall(n3, data)).toThrow(/net\.layers\[0\]: rowSteps has 30 elements, expected outDim = 8/);
    (n3.layers[0] as { inputMajor: number }).inputMajor = 2;
    expect(trainCall(n3, data)).toThrow(/inputMajor must be 0 or 1/);
    const n4 = fresh();
    n4.layers[1]!.sampling = fixedSampling(7, 12, [1]);
    expect(trainCall(n4, data)).toThrow(/hash\.dim = 7 differs from inDim 8/);
    const n5 = fresh();
    n5.layers[1]!.sampling = fixedSampling(8, 11, [1]);
    expect(trainCall(n5, data)).toThrow(/tables\.N = 11 differs from outDim 12/);
    expect(trainCall({ layers: [] }, data)).toThrow(/net\.layers must hold 1 to 64 layers/);
    expect(trainCall({}, data)).toThrow(/Expected an array for net\.layers/);
  });

  it('bad rows: point id, feature id, label id, unsorted labels, corrupt offsets', () => {
    expect(trainCall(fresh(), data, Uint32Array.of(0, 6))).toThrow(/pointIds\[1\] = 6 is out of range \(the dataset has 6 points\)/);
    const bigFeature = { ...data, indices: data.indices.slice() };
    bigFeature.indices[data.offsets[2]!] = 30;
    expect(trainCall(fresh(), bigFeature)).toThrow(/feature id 30 of point 2 is >= the network's input dimension 30/);
    const bigLabel = { ...data, labelIndices: data.labelIndices.slice() };
    bigLabel.labelIndices[data.labelOffsets[1]!] = 12;
    expect(trainCall(fresh(), bigLabel)).toThrow(/label id 12 of point 1 is >= the last layer's size 12/);
    const twoLabels = randomData(4, 30, 12, 304, { labelCounts: [2] });
    const unsorted = { ...twoLabels, labelIndices: twoLabels.labelIndices.slice().reverse() };
    expect(trainCall(fresh(), unsorted)).toThrow(/labels of point 0 are not strictly increasing/);
    const corrupt = { ...data, offsets: data.offsets.slice() };
    corrupt.offsets[4] = 1000;
    expect(trainCall(fresh(), corrupt, Uint32Array.of(3))).toThrow(/data\.offsets of point 3 are corrupt/);
  });

  it('bad hyper-parameters', () => {
    expect(trainCall(fresh(), data, ids(4), { ...HYPER, mode: 4 })).toThrow(/hyper\.mode must be 0 \(adam\), 1 \(gradient\), 2 \(loss only\) or 3 \(sparse gradient\)/);
    expect(trainCall(fresh(), data, ids(4), { ...HYPER, beta1: 1 })).toThrow(/beta1 and hyper\.beta2 must be in \[0, 1\)/);
    expect(trainCall(fresh(), data, ids(4), { ...HYPER, lr: NaN })).toThrow(/hyper\.lr must be finite/);
    expect(trainCall(fresh(), data, ids(4), { ...HYPER, seed: -1 })).toThrow(/unsigned 32-bit integer for seed/);
    expect(trainCall(fresh(), data, ids(4), { ...HYPER, mode: 1 })).toThrow(/hyper\.grads must be an array/);
    const net = fresh();
    const grads = net.layers.map((l) => ({ weights: new Float32Array(l.weights.length), bias: new Float32Array(l.outDim) }));
    grads[1]!.weights = new Float32Array(5);
    expect(trainCall(net, data, ids(4), { ...HYPER, mode: 1, grads })).toThrow(/hyper\.grads\[1\]: weights has 5 elements/);
  });

  it('a rejected slice changes nothing', () => {
    const net = fresh();
    const before = snapshot(net);
    expect(trainCall(net, data, Uint32Array.of(0, 1, 99))).toThrow(/out of range/);
    net.layers.forEach((l, k) => {
      expect(l.weights).toEqual(before[k]!.weights);
      expect(l.rowSteps).toEqual(before[k]!.rowSteps);
    });
  });
});

describe('netPredictSlice rejects bad input', () => {
  const data = randomData(6, 30, 12, 305);
  const net = makeNet(30, [8, 12], 306);
  const call = (k: number, sampled: number, idx = new Uint32Array(12), val = new Float32Array(12), pts = ids(4)) => () =>
    native().netPredictSlice(net, data, pts, k, sampled as 0 | 1, idx, val);

  it('k, sampled, output sizes, rows', () => {
    expect(call(0, 0)).toThrow(/k must be positive/);
    expect(call(3, 2)).toThrow(/sampled must be 0/);
    expect(call(4, 0)).toThrow(/outIdx is too short: expected at least 16/);
    expect(call(3, 0, new Uint32Array(12), new Float32Array(11))).toThrow(/outVal is too short/);
    expect(call(3, 0, new Uint32Array(12), new Float32Array(12), Uint32Array.of(0, 1, 2, 9))).toThrow(/pointIds\[3\] = 9/);
  });
});
