// Worker thread of the sharded timing probe (calibrate.ts probeShard): rank 1 of a 2-rank label-sharded job
// emulated in one process, beside the probe's rank 0 on the main thread: its own label and feature slices of
// the probe network, the same batches, each collective a barrier of the two threads (probe-comm.ts: polling,
// then asleep).
// Rank 0's steps are then timed as a rank's are when another rank shares the machine's cores and memory.
import { parentPort, workerData } from 'node:worker_threads';
import type { SparseDataset } from '../datasets/csr.js';
import type { NetworkConfig } from '../network/config.js';
import { resolveConfig } from '../network/config.js';
import { emptyWide } from '../network/wide.js';
import { native } from '../native/addon.js';
import { abandon, probeComm, type ProbeBarrier } from './probe-comm.js';
import { allocateRank, buildSliceWide, ShardedModel, shardFeatures, shardLabels } from './sharded.js';

/** What the main thread hands the worker (typed arrays on SharedArrayBuffers are shared, not copied). */
export interface ProbeRankInput {
  config: NetworkConfig;
  data: SparseDataset;
  wideOn: SparseDataset;
  labelFreq: Uint32Array;
  featureFreq: Uint32Array;
  barrier: ProbeBarrier;
  /** Steps to run (rank 0 runs as many), their batch and first seed. */
  steps: number;
  batch: number;
  seed: number;
}

const o = workerData as ProbeRankInput;
try {
  const labels = shardLabels(o.labelFreq, 2).labelsOf[1]!, features = shardFeatures(o.featureFreq, 2).featuresOf[1]!;
  const spec = allocateRank(o.config, labels.length, features.length);
  const out = spec.layers.at(-1)!;
  if (resolveConfig(o.config).layers.at(-1)!.wide) {
    out.wide = emptyWide(resolveConfig(o.config).inputDim);
    buildSliceWide(o.config, { spec }, labels, o.wideOn);
  }
  native().netPrefault(spec);
  const model = new ShardedModel(probeComm(2, 1, o.barrier), o.config, { spec }, o.labelFreq, o.featureFreq);
  model.prepareLogQ(o.data.points, o.batch);
  parentPort!.postMessage('ready');
  const adam = { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8 };
  for (let i = 0; i < o.steps; i++) {
    const start = ((o.seed + i) * o.batch) % (o.data.points - o.batch);
    model.step(o.data, { pointIds: Uint32Array.from({ length: o.batch }, (_, q) => start + q), seed: o.seed + i, ...adam });
  }
  parentPort!.postMessage('done');
} catch (e) {
  abandon(o.barrier);
  parentPort!.postMessage(`error: ${(e as Error).message}`);
}
