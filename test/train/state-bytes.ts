// Shared by the fault tests: the bytes of everything a batch update touches, to compare a run that met a
// fault with an uninterrupted one bit for bit.
import type { Network } from '../../src/network/network.js';

/** Weights, biases, Adam moments and step counters of every layer, concatenated. */
export function weightBytes(net: Network): Buffer {
  return Buffer.concat(net.spec.layers.flatMap((l) =>
    [l.weights, l.bias, l.mWeights, l.vWeights, l.mBias, l.vBias, l.rowSteps, l.biasSteps].map((a) => Buffer.from(a.buffer, a.byteOffset, a.byteLength))));
}
