// sublinear as a benchmark system, with the same options and result shape as the dense baselines
// (bench/baselines/common.ts), so `npm run bench` compares like with like: same data, network, batch
// size, learning rate, Adam and seed.
//
// Evaluation points of the P@1 curve are taken at epoch ends (sublinear's epochs are short); their time
// is excluded from training time, as for the baselines.
import type { SparseDataset } from '../../src/datasets/csr.js';
import { subset } from '../../src/datasets/index.js';
import { Network } from '../../src/network/network.js';
import type { SamplingConfig } from '../../src/network/config.js';
import { computeMetrics } from '../../src/network/metrics.js';
import { evalSubset, resolveOptions, type BaselineOptions, type BaselineResult } from '../baselines/common.js';
import { Xoshiro128, shuffleInPlace } from '../../src/util/rng.js';
import { peakRssBytes } from '../../src/util/peak-rss.js';
import { fit } from '../../src/train/fit-network.js';

export interface SublinearOptions extends BaselineOptions {
  /** LSH sampling of the output layer; null for a dense softmax. Default DWTA K=6 L=50 (SLIDE's Amazon setting). */
  sampling?: SamplingConfig | null;
  /** Worker threads. Default 1. */
  workers?: number;
}

async function p1On(net: Network, data: SparseDataset, rows: Uint32Array, workers: number): Promise<number> {
  const sub = rows.length === data.points ? data : subset(data, rows);
  const pred = await net.predict(sub, { k: 1, workers });
  return computeMetrics({ topIdx: pred.labels, kMax: 1, labelOffsets: sub.labelOffsets, labelIndices: sub.labelIndices, ks: [1] })['p1']!;
}

export async function trainSublinear(opts: SublinearOptions): Promise<BaselineResult> {
  const o = resolveOptions(opts);
  const workers = opts.workers ?? 1;
  const sampling = opts.sampling === undefined ? { hash: 'dwta' as const, K: 6, L: 50 } : opts.sampling;
  let train = opts.train;
  let epochs = Number.isFinite(o.epochs) ? Math.ceil(o.epochs) : 1000;
  // A fixed number of batches (throughput runs): one epoch over a seeded subset of that many rows.
  if (Number.isFinite(o.maxBatches)) {
    const rows = Uint32Array.from({ length: train.points }, (_, i) => i);
    shuffleInPlace(rows, new Xoshiro128(o.seed + 99));
    train = subset(train, rows.slice(0, Math.min(train.points, o.maxBatches * o.batchSize)).sort());
    epochs = 1;
  }
  const net = new Network({
    inputDim: train.features,
    seed: o.seed,
    layers: [...o.hidden.map((size) => ({ size, activation: 'relu' as const })), { size: train.labels, activation: 'softmax' as const, ...(sampling ? { sampling } : {}) }],
  });
  const test = opts.test;
  const evalRows = test ? evalSubset(test.points, o.evalPoints, o.seed) : new Uint32Array(0);
  const curve: BaselineResult['curve'] = [];
  let evalSeconds = 0;
  const ac = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  if (Number.isFinite(o.maxSeconds)) timer = setTimeout(() => ac.abort(), o.maxSeconds * 1000);
  const stats = await fit(net, train, {
    epochs, batchSize: o.batchSize, lr: o.lr, beta1: o.beta1, beta2: o.beta2, eps: o.eps, workers, signal: ac.signal,
    onEpochEnd: async (_epoch, s) => {
      if (!test) return;
      const e0 = performance.now();
      const p1 = await p1On(net, test, evalRows, Math.max(1, workers));
      evalSeconds += (performance.now() - e0) / 1000;
      curve.push({ seconds: s.trainSeconds, samples: s.samples, p1 });
      opts.onEval?.({ seconds: s.trainSeconds, samples: s.samples, batches: s.batches, p1, loss: s.lastLoss });
      // Stop once the time budget is spent (measured in training time, evaluation excluded).
      if (s.trainSeconds >= o.maxSeconds) ac.abort();
    },
  });
  if (timer) clearTimeout(timer);
  let finalP1 = NaN;
  if (test) {
    const e0 = performance.now();
    const rows = Uint32Array.from({ length: o.finalEvalPoints }, (_, i) => i);
    finalP1 = await p1On(net, test, rows, Math.max(1, workers));
    evalSeconds += (performance.now() - e0) / 1000;
  }
  return {
    system: 'sublinear',
    samplesPerSec: stats.samplesPerSec,
    steadySamplesPerSec: stats.samplesPerSec,
    seconds: stats.trainSeconds,
    batchSeconds: [],
    samples: stats.samples,
    batches: stats.batches,
    finalP1,
    curve,
    diverged: !Number.isFinite(stats.lastLoss) && stats.batches > 0,
    finalLoss: stats.lastLoss,
    evalSeconds,
    peakRssBytes: peakRssBytes(),
    info: {
      workers,
      output: sampling ? `${sampling.hash ?? 'dwta'} K=${sampling.K ?? 6} L=${sampling.L ?? 50}` : 'dense',
      rebuildSeconds: stats.rebuildSeconds,
      rebuilds: stats.rebuilds,
    },
  };
}
