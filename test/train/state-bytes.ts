// Shared by the fault tests: a small sampled network on synthetic data, the bytes of everything a batch
// update touches, and those bytes after an uninterrupted run, to compare a run that met a fault with.
import { synthesize } from '../../src/datasets/index.js';
import { Network } from '../../src/network/network.js';
import type { FitOptions } from '../../src/train/fit.js';
import { fit } from '../../src/train/fit-network.js';

/** Weights, biases, Adam moments and step counters of every layer, concatenated. */
export function weightBytes(net: Network): Buffer {
  return Buffer.concat(net.spec.layers.flatMap((l) =>
    [l.weights, l.bias, l.mWeights, l.vWeights, l.mBias, l.vBias, l.rowSteps, l.biasSteps].map((a) => Buffer.from(a.buffer, a.byteOffset, a.byteLength))));
}

/**
 * `points` tiny-shape points (seed 11), a 32-wide network with a DWTA-sampled output (seed 4), and the
 * weight bytes of an uninterrupted `fit(data, base)` (computed once, on first use).
 */
export function faultFixture(points: number, base: FitOptions) {
  const data = synthesize({ shape: 'tiny', points, seed: 11 });
  const config = () => ({
    inputDim: data.features,
    layers: [{ size: 32 }, { size: data.labels, sampling: { hash: 'dwta' as const, K: 3, L: 8, budget: 16 } }],
    seed: 4,
  });
  let reference: Buffer | undefined;
  const uninterrupted = async (): Promise<Buffer> => {
    if (!reference) {
      const net = new Network(config());
      await fit(net, data, base);
      reference = weightBytes(net);
    }
    return reference;
  };
  return { data, config, base, uninterrupted };
}
