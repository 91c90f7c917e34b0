// Throughput of the network kernels on an Amazon-670K-shaped network (135,909 -> 128 ReLU -> 670,091 softmax,
// batch 128, ~75 nonzeros and ~5.4 labels per point from the synthetic 'amazon-670k' shape), single thread:
//   dense   - netTrainSlice with the full softmax (every output neuron: the blocked GEMM path);
//   sampled - netTrainSlice with an LSH-sampled output layer (DWTA K=6, L=50, 2^18 buckets of <= 128 ids,
//             union of the buckets, budget and random fill 3,351 = 0.5% of the labels: the network config's
//             defaults), tables built once from the initial weights (build time reported separately);
//   predict - netPredictSlice exact (every output neuron) and sampled (LSH candidates).
//
//   node dist/bench/kernels.js [--json] [--batches n] [--dense-batches n] [--batch b] [--only dense|sampled] [--seed s]
//
// Weights + Adam state take ~1.25 GB; the LSH tables ~0.5 GB.
import { synthesize } from '../src/datasets/synth.js';
import { allocateTables, generateHashSpec } from '../src/lsh/index.js';
import { native } from '../src/native/addon.js';
import type { NetSpec, TrainHyper } from '../src/native/network-types.js';
import { allocateLayers, stateBytes } from '../src/network/state.js';
import { defineCommand } from '../src/cli/args.js';
import { benchMain } from './cli.js';

interface Args {
  json: boolean;
  batches: number;
  denseBatches: number;
  batch: number;
  only: 'dense' | 'sampled' | null;
  seed: number;
}

export const kernelsCmd = defineCommand({
  name: 'bench/kernels',
  summary: 'Single-thread throughput of the network kernels at the Amazon-670K shape: dense and LSH-sampled training, exact and sampled prediction.',
  description: 'Weights and Adam state take about 1.25 GB, the LSH tables about 0.5 GB.',
  flags: {
    batches: { type: 'integer', min: 1, default: 40, valueName: 'n', description: 'timed batches of the sampled run' },
    denseBatches: { type: 'integer', min: 1, default: 4, valueName: 'n', description: 'timed batches of the dense run' },
    batch: { type: 'integer', min: 1, default: 128, valueName: 'n', description: 'points per batch' },
    only: { type: 'choice', choices: ['dense', 'sampled'] as const, description: 'run only this kernel (default: both)' },
    seed: { type: 'integer', min: 1, default: 1, valueName: 'n', description: 'data, network and hash seed' },
    json: { type: 'boolean', description: 'print the results as JSON' },
  },
  run: async (o) => {
    measure({ ...o, only: o.only ?? null });
    return 0;
  },
});

const INPUT = 135_909, HIDDEN = 128, LABELS = 670_091;

function measure(args: Args): void {
  const log = (s: string) => !args.json && console.log(s);
  const nat = native();
  const result: Record<string, unknown> = { cpu: nat.cpuFeatures(), blockIsa: nat.netKernelIsa, batch: args.batch };
  log(`block kernels: ${nat.netKernelIsa}, batch ${args.batch}, single thread`);

  let t = performance.now();
  const batchesTotal = args.denseBatches + args.batches + 2;
  const data = synthesize({ shape: 'amazon-670k', points: args.batch * batchesTotal, seed: args.seed });
  log(`data: ${data.points} points, ${(data.offsets[data.points]! / data.points).toFixed(1)} nnz/point, ` +
    `${(data.labelOffsets[data.points]! / data.points).toFixed(2)} labels/point (${((performance.now() - t) / 1000).toFixed(1)} s)`);

  t = performance.now();
  const config = {
    inputDim: INPUT, seed: args.seed,
    layers: [{ size: HIDDEN, activation: 'relu' as const }, { size: LABELS, activation: 'softmax' as const }],
  };
  const net: NetSpec = { layers: allocateLayers(config) };
  log(`network: ${(stateBytes(config) / 2 ** 30).toFixed(2)} GiB of weights + Adam state (${((performance.now() - t) / 1000).toFixed(1)} s to allocate)`);

  const stats = new Float64Array(4);
  const hyper: TrainHyper = { mode: 0, lr: 1e-4, beta1: 0.9, beta2: 0.999, eps: 1e-8, gradScale: 1 / args.batch, seed: 0 };
  const slice = (b: number) => {
    const ids = new Uint32Array(args.batch);
    for (let i = 0; i < args.batch; i++) ids[i] = b * args.batch + i;
    return ids;
  };
  // Runs `batches` timed batches after one warm-up batch; returns samples/s and mean stats.
  const run = (batches: number, first: number) => {
    nat.netTrainSlice(net, data, slice(first), { ...hyper, seed: first }, stats);
    let loss = 0, samples = 0, active = 0, missed = 0;
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    for (let b = first + 1; b <= first + batches; b++) {
      nat.netTrainSlice(net, data, slice(b), { ...hyper, seed: b }, stats);
      loss += stats[0]!;
      samples += stats[1]!;
      active += stats[2]!;
      missed += stats[3]!;
    }
    const secs = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(c0);
    const cpuSecs = (cpu.user + cpu.system) / 1e6;
    let labels = 0;
    for (let b = first + 1; b <= first + batches; b++) {
      for (const p of slice(b)) labels += data.labelOffsets[p + 1]! - data.labelOffsets[p]!;
    }
    return { samplesPerSec: samples / secs, samplesPerCpuSec: samples / cpuSecs, msPerBatch: (1000 * secs) / batches, meanLoss: loss / samples, meanActive: active / samples, labelMissRate: missed / labels };
  };
  const predictRate = (sampled: 0 | 1, points: number) => {
    const k = 5;
    const ids = new Uint32Array(points);
    for (let i = 0; i < points; i++) ids[i] = i;
    const idx = new Uint32Array(points * k), val = new Float32Array(points * k);
    const t0 = performance.now();
    nat.netPredictSlice(net, data, ids, k, sampled, idx, val);
    return points / ((performance.now() - t0) / 1000);
  };

  if (args.only !== 'sampled') {
    const dense = run(args.denseBatches, 0);
    result.dense = dense;
    log(`train dense (full softmax):  ${dense.samplesPerSec.toFixed(1)} samples/s wall, ${dense.samplesPerCpuSec.toFixed(1)} per CPU-second  (${dense.msPerBatch.toFixed(0)} ms/batch, mean loss ${dense.meanLoss.toFixed(3)})`);
    const exact = predictRate(0, 256);
    result.predictExact = { pointsPerSec: exact };
    log(`predict exact:               ${exact.toFixed(1)} points/s`);
  }
  if (args.only !== 'dense') {
    t = performance.now();
    const hash = generateHashSpec({ family: 'dwta', K: 6, L: 50, dim: HIDDEN, seed: args.seed, binSize: 8, rangeBits: 18 });
    const tables = allocateTables({ L: 50, N: LABELS, rangeBits: hash.rangeBits, bucketSize: 128, slack: 1, policy: 'fifo' });
    const budget = Math.ceil(0.005 * LABELS);
    net.layers[1]!.sampling = { hash, tables, query: { mode: 0, budget, minFreq: 1, minActive: budget } };
    const t1 = performance.now();
    nat.lshRehash(hash, tables, net.layers[1]!.weights, 0, 50, args.seed);
    const buildSeconds = (performance.now() - t1) / 1000;
    log(`tables: DWTA K=6 L=50, rangeBits ${hash.rangeBits}, build ${buildSeconds.toFixed(1)} s (setup ${((performance.now() - t) / 1000).toFixed(1)} s)`);
    const sampled = run(args.batches, args.denseBatches + 1);
    result.sampled = { ...sampled, tableBuildSeconds: buildSeconds, budget };
    log(`train sampled (LSH output):  ${sampled.samplesPerSec.toFixed(1)} samples/s wall, ${sampled.samplesPerCpuSec.toFixed(1)} per CPU-second  (${sampled.msPerBatch.toFixed(1)} ms/batch, ` +
      `${sampled.meanActive.toFixed(0)} active/sample, ${(100 * sampled.labelMissRate).toFixed(1)}% labels missed by LSH)`);
    const ps = predictRate(1, 1024);
    result.predictSampled = { pointsPerSec: ps };
    log(`predict sampled:             ${ps.toFixed(1)} points/s`);
  }
  if (args.json) console.log(JSON.stringify(result, null, 2));
}

await benchMain(import.meta.url, kernelsCmd, 'node dist/bench/kernels.js');
