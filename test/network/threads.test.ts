// netTrainSlice with intra-batch threads (TrainHyper.threads, native/net_parallel.h): the parts of a dense
// output layer (rows), of layer 0's forward (samples) and of layer 0's update (feature rows) computed by
// several threads give what one thread gives (the float64 reference), and a given count is reproducible.
import { describe, expect, it } from 'vitest';
import { native } from '../../src/native/addon.js';
import type { LayerGrads, NetSpec, TrainHyper } from '../../src/native/network-types.js';
import { ids, makeNet, maxRelDiff, randomData, randomizeBiases, snapshot } from './helpers.js';
import { refFromState, refTrainSlice, zeroGrads, type RefData } from './reference.js';

const HYPER = { lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8 };

function train(net: NetSpec, data: RefData, pointIds: Uint32Array, h: Partial<TrainHyper> & { mode: 0 | 1 | 2 }): Float64Array {
  const stats = new Float64Array(4);
  native().netTrainSlice(net, data, pointIds, { ...HYPER, gradScale: 1 / pointIds.length, seed: 7, ...h }, stats);
  return stats;
}

// 600 features of which a 48-point slice touches several hundred (layer 0 splits at >= 64 rows per thread),
// 300 dense outputs (>= 16 blocks of 4 rows per thread), 48 samples (>= 8 per thread).
const data = randomData(96, 600, 300, 21, { maxNnz: 40 });
const slices = [ids(48), ids(48, 48)];

describe('netTrainSlice with intra-batch threads', () => {
  for (const threads of [2, 3, 5]) {
    it(`${threads} threads: 600 -> 24 -> 300, Adam over two slices, equal to the reference`, () => {
      const net = makeNet(600, [24, 300], 31);
      randomizeBiases(net, 32);
      const ref = refFromState(net.layers);
      for (const b of slices) {
        const stats = train(net, data, b, { mode: 0, threads });
        const r = refTrainSlice(ref, data, b, { mode: 0, ...HYPER, gradScale: 1 / b.length });
        expect(stats[0]).toBeCloseTo(r.loss, 3);
        net.layers.forEach((l, k) => {
          expect(maxRelDiff(l.weights, ref[k]!.W), `layer ${k} weights`).toBeLessThan(1e-5);
          expect(maxRelDiff(l.bias, ref[k]!.b), `layer ${k} bias`).toBeLessThan(1e-5);
          expect(maxRelDiff(l.vWeights, ref[k]!.vW), `layer ${k} v`).toBeLessThan(1e-5);
          expect(Array.from(l.rowSteps), `layer ${k} rowSteps`).toEqual(Array.from(ref[k]!.rowSteps));
        });
      }
    });
  }

  it('two hidden layers, and mode 1 gradients added into the buffers', () => {
    const net = makeNet(600, [24, 16, 300], 33);
    const ref = refFromState(net.layers);
    const grads: LayerGrads[] = net.layers.map((l) => ({ weights: new Float32Array(l.weights.length), bias: new Float32Array(l.outDim) }));
    const refG = zeroGrads(ref);
    const before = snapshot(net);
    const stats = train(net, data, ids(48), { mode: 1, grads, threads: 3 });
    const r = refTrainSlice(ref, data, ids(48), { mode: 1, ...HYPER, gradScale: 1 / 48 }, undefined, refG);
    expect(stats[0]).toBeCloseTo(r.loss, 3);
    grads.forEach((g, k) => {
      expect(maxRelDiff(g.weights, refG.W[k]!), `layer ${k} dW`).toBeLessThan(1e-5);
      expect(maxRelDiff(g.bias, refG.b[k]!), `layer ${k} db`).toBeLessThan(1e-5);
    });
    net.layers.forEach((l, k) => expect(l.weights).toEqual(before[k]!.weights));
  });

  it('mode 2: the same loss as one thread', () => {
    const net = makeNet(600, [24, 300], 34);
    const one = train(net, data, ids(48), { mode: 2 });
    const three = train(net, data, ids(48), { mode: 2, threads: 3 });
    expect(three[0]).toBeCloseTo(one[0]!, 3);
  });

  it('a given thread count gives the same bits in every run (with dropout)', () => {
    const run = () => {
      const net = makeNet(600, [24, 300], 35);
      net.layers[0]!.dropout = 0.5;
      for (const b of slices) train(net, data, b, { mode: 0, threads: 3 });
      return net.layers.map((l) => Array.from(l.weights));
    };
    expect(run()).toEqual(run());
  });

  it('refuses a thread count outside [1, 256]', () => {
    const net = makeNet(600, [24, 300], 36);
    expect(() => train(net, data, ids(4), { mode: 0, threads: 0 })).toThrow('hyper.threads must be in [1, 256]');
    expect(() => train(net, data, ids(4), { mode: 0, threads: 257 })).toThrow('hyper.threads must be in [1, 256]');
  });
});
