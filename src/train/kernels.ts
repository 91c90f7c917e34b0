// Runs tasks by calling the native kernels directly. Used in-process (workers: 0) and, unchanged,
// inside each piscina worker, so one worker computes exactly what the serial engine computes.
import { native } from '../native.js';
import type { PredictResult, PredictTask, RehashTask, SparseTrainResult, TrainResult, TrainTask } from './tasks.js';

export function runTrain(t: TrainTask): TrainResult {
  if (t.failBelowAttempt !== undefined && (t.attempt ?? 0) < t.failBelowAttempt) {
    throw new Error(`injected failure (attempt ${t.attempt ?? 0})`);
  }
  const stats = new Float64Array(4);
  native().netTrainSlice(
    t.net,
    t.data,
    t.pointIds,
    { mode: 0, lr: t.lr, beta1: t.beta1, beta2: t.beta2, eps: t.eps, gradScale: t.gradScale, seed: t.seed >>> 0 },
    stats,
  );
  return { lossSum: stats[0]!, samples: stats[1]!, activeSum: stats[2]!, missedLabels: stats[3]! };
}

/** Mode 3: the gradient rows of the rows the slice touched; the weights are left alone (src/train/distributed.ts). */
export function runTrainSparse(t: TrainTask): SparseTrainResult {
  if (t.failBelowAttempt !== undefined && (t.attempt ?? 0) < t.failBelowAttempt) {
    throw new Error(`injected failure (attempt ${t.attempt ?? 0})`);
  }
  const stats = new Float64Array(4);
  const grads = native().netTrainSlice(
    t.net,
    t.data,
    t.pointIds,
    {
      mode: 3, lr: t.lr, beta1: t.beta1, beta2: t.beta2, eps: t.eps, gradScale: t.gradScale, seed: t.seed >>> 0,
      ...(t.fillSeed !== undefined ? { fillSeed: t.fillSeed >>> 0 } : {}),
    },
    stats,
  )!;
  return { lossSum: stats[0]!, samples: stats[1]!, activeSum: stats[2]!, missedLabels: stats[3]!, grads };
}

export function runPredict(t: PredictTask): PredictResult {
  const n = t.pointIds.length;
  const idx = new Uint32Array(n * t.k);
  const val = new Float32Array(n * t.k);
  const scored = native().netPredictSlice(t.net, t.data, t.pointIds, t.k, t.sampled ? 1 : 0, idx, val);
  return { idx, val, scored };
}

export function runRehash(t: RehashTask): number {
  const layer = t.net.layers[t.layer]!;
  const s = layer.sampling;
  if (!s) throw new Error(`layer ${t.layer} is not sampled`);
  const start = performance.now();
  native().lshRehash(s.hash, s.tables, layer.weights, t.t0, t.t1, t.seed);
  return (performance.now() - start) / 1000;
}
