// The sampled-softmax correction of a shared set S (SamplingConfig.logQ). A batch's S holds the batch's
// distinct labels plus uniform random ids up to minActive, so neuron j is in S with probability
//   q_j = b_j + (1 - b_j) u,   b_j = 1 - (1 - c_j / points)^batchSize   (j is a label of the batch),
//   u = max(0, minActive - sum_j b_j) / (N - sum_j b_j)                  (the uniform fill's rate),
// with c_j the training count of label j. Adding -log q_j to the logits of S makes the sampled
// log-sum-exp, sum over S of exp(z_j) / q_j, an estimate of the full softmax's (Bengio & Senecal 2008;
// Jean et al. 2015; Yi et al. 2019 for in-batch negatives).

import { sharedFloat32 } from '../datasets/csr.js';

/** (N) offsets -log q_j on a SharedArrayBuffer, for labels with training counts `freq`. */
export function sharedSetLogQ(freq: Uint32Array, points: number, batchSize: number, minActive: number): Float32Array {
  const N = freq.length;
  const out = sharedFloat32(N);
  if (N === 0 || points === 0) return out;
  const b = new Float64Array(N);
  let expected = 0;
  for (let j = 0; j < N; j++) {
    b[j] = -Math.expm1(batchSize * Math.log1p(-Math.min(freq[j]! / points, 1 - 1e-12)));
    expected += b[j]!;
  }
  const u = expected < N ? Math.min(1, Math.max(0, minActive - expected) / (N - expected)) : 0;
  for (let j = 0; j < N; j++) {
    const q = b[j]! + (1 - b[j]!) * u;
    out[j] = -Math.log(Math.max(q, 1 / N));
  }
  return out;
}
