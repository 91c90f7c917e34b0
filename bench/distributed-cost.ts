// Cost model of `train --distributed` at the Amazon-670K shape: measures, on this machine and in this
// process (one thread), what one rank does per global step as a function of its share of the batch, then
// predicts samples/s for R ranks on links of 10, 25 and 100 Gb/s.
//
//   npm run bench:distributed-cost -- [--train 30000] [--batch 128] [--warm 200] [--slices 40] [--trials 3] [--latency-us 20] [--json]
//
// Measured on one thread: the sparse-gradient pass (training mode 3) per local batch b, the apply cost per
// byte of gradient rows (netApplyRows), one hash-table rebuild. Then, for R ranks, `trials` global steps are
// computed for real: R parts of b points with the part seeds and the common shared-set fill that
// DistributedExecutor uses, and per sparse layer the same choice (gather the rows, or sum them over the
// union of ids when 2 |union| < total). Model of one step:
//   T(R) = g(b) + a * (bytes of rows applied) + (bytes received per rank) / link + 3 (R - 1) latency
//          + rebuild seconds * rebuilds per step (every rank rebuilds its own tables)
// with bytes received per rank = (R - 1)/R (ids + gathered rows) + 2 (R - 1)/R (all-reduced buffer) (ring
// algorithms), and samples/s = b R / T(R). Strong scaling keeps the global batch B (b = B / R: what
// `--batch B` does); weak scaling keeps b = B per rank (`--batch` B R). The model assumes one core per
// rank and no overlap of the exchange with computation (the implementation does not overlap them).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir, cpus } from 'node:os';
import { join } from 'node:path';
import { generateSynthetic, readXC } from '../src/datasets/index.js';
import { toShared } from '../src/datasets/csr.js';
import { defaultConfig } from '../src/network/config.js';
import { Network } from '../src/network/network.js';
import { native } from '../src/native/addon.js';
import type { RowUpdate } from '../src/native/network-types.js';
import { InlineExecutor } from '../src/network/executor.js';
import { labelFrequencies } from '../src/network/metrics.js';
import { sharedSetLogQ } from '../src/train/logq.js';
import { Xoshiro128 } from '../src/util/rng.js';
import { defineCommand } from '../src/cli/args.js';
import { benchMain } from './cli.js';

const ADAM = { lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8 };

export const distributedCostCmd = defineCommand({
  name: 'bench:distributed-cost',
  summary: 'Cost model of train --distributed at the Amazon-670K shape: one rank measured, R ranks predicted at 10, 25, 100 Gb/s.',
  flags: {
    train: { type: 'integer', min: 1, default: 30000, valueName: 'n', description: 'synthetic training points' },
    batch: { type: 'integer', min: 1, default: 128, valueName: 'n', description: 'global batch (strong scaling), per-rank batch (weak scaling)' },
    warm: { type: 'integer', min: 0, default: 200, valueName: 'n', description: 'training batches before measuring' },
    slices: { type: 'integer', min: 1, default: 40, valueName: 'n', description: 'slices timed for the apply cost per byte' },
    trials: { type: 'integer', min: 1, default: 3, valueName: 'n', description: 'global steps computed per rank count' },
    latencyUs: { type: 'number', min: 0, default: 20, valueName: 'us', description: 'latency of one collective message' },
    rebuildsPerStep: { type: 'number', min: 0, default: 3 / 235, valueName: 'x', description: 'hash-table rebuilds per step' },
    json: { type: 'boolean', description: 'print only the JSON line' },
  },
  run: async (o) => {
    await costModel(o);
    return 0;
  },
});

async function costModel(a: { train: number; batch: number; warm: number; slices: number; trials: number; latencyUs: number; rebuildsPerStep: number; json: boolean }) {
  const B = a.batch, warm = a.warm, nSlices = a.slices;
  const latency = a.latencyUs * 1e-6;
  const rebuildsPerStep = a.rebuildsPerStep;
  const dir = await mkdtemp(join(tmpdir(), 'sublinear-dcost-'));
  try {
    await generateSynthetic({ shape: 'amazon-670k', train: a.train, test: 0, seed: 7, outDir: dir });
    const data = toShared(await readXC(join(dir, 'train.txt')));
    const config = defaultConfig({ features: data.features, labels: data.labels, points: data.points, nnz: data.offsets[data.points]! }, 1);
    const net = new Network(config);
    const ex = new InlineExecutor();
    await net.rebuildTables(ex);
    const last = net.spec.layers.at(-1)!;
    const sc = net.config.layers.at(-1)!.sampling;
    if (last.sampling && sc?.logQ) last.sampling.logQ = sharedSetLogQ(labelFrequencies(data.labelIndices, last.outDim), data.points, B, sc.minActive);
    const rng = new Xoshiro128(11n);
    const pick = (n: number) => Uint32Array.from({ length: n }, () => rng.below(data.points));
    for (let i = 0; i < warm; i++) {
      native().netTrainSlice(net.spec, data, pick(B), { mode: 0, ...ADAM, gradScale: 1 / B, seed: i }, new Float64Array(4));
    }
    let t0 = performance.now();
    await net.rebuildTables(ex);
    const rb = (performance.now() - t0) / 1000;

    const layers = net.spec.layers;
    const sparse = layers.map((l, k) => k === 0 || !!l.sampling);
    const width = layers.map((l) => (l.inputMajor ? l.outDim : l.inDim));
    // Apply cost per byte of gradient rows (netApplyRows), measured on whole-batch slices.
    let applyBytes = 0, applySeconds = 0;
    for (let s = 0; s < nSlices; s++) {
      const g = native().netTrainSlice(net.spec, data, pick(B), { mode: 3, ...ADAM, gradScale: 1 / B, seed: 500 + s }, new Float64Array(4))!;
      t0 = performance.now();
      native().netApplyRows(net.spec, ADAM, g.map((x, layer) => ({ layer, ...x } as RowUpdate)));
      applySeconds += (performance.now() - t0) / 1000;
      g.forEach((x) => (applyBytes += x.rows.byteLength));
    }
    const perByte = applySeconds / Math.max(1, applyBytes);

    // One global step on R ranks with b points each, exactly as DistributedExecutor exchanges it: every
    // part's seed from its global index, the shared fill from the batch seed; per sparse layer the rows are
    // gathered, or summed over the union of ids when 2 |union| < sum of the parts' rows.
    const stepCost = (R: number, b: number, trials: number) => {
      let grad = 0, volume = 0, received = 0, applied = 0, reduced = 0;
      for (let t = 0; t < trials; t++) {
        const seed = 7000 + t;
        const parts = Array.from({ length: R }, (_, g) => {
          const pts = pick(b);
          const t0 = performance.now();
          const x = native().netTrainSlice(net.spec, data, pts, { mode: 3, ...ADAM, gradScale: 1 / (b * R), seed: (seed + g * 0x9e3779b9) >>> 0, fillSeed: seed }, new Float64Array(4))!;
          grad += (performance.now() - t0) / 1000 / R; // the ranks run in parallel: one rank's share
          return x;
        });
        let ids = 40 * R, gathered = 0, red = 4 * (2 + layers[0]!.outDim);
        layers.forEach((l, k) => {
          if (!sparse[k]) return;
          let sum = 0;
          const u = new Set<number>();
          for (const p of parts) {
            sum += p[k]!.ids.length;
            for (const id of p[k]!.ids) u.add(id);
          }
          ids += 4 * (sum + R);
          const rowBytes = 4 * (width[k]! + (l.inputMajor ? 0 : 1));
          if (R > 1 && 2 * u.size < sum) {
            red += u.size * rowBytes;
            applied += u.size * rowBytes;
            reduced++;
          } else {
            gathered += sum * rowBytes;
            applied += sum * rowBytes;
          }
        });
        volume += ids + gathered + red;
        received += R > 1 ? ((R - 1) / R) * (ids + gathered) + (2 * (R - 1) / R) * red : 0;
      }
      return { grad: grad / trials, volume: volume / trials, received: received / trials, applied: applied / trials, reduced: reduced / trials };
    };
    const rows: { b: number; bytes: number; gradSeconds: number; rowsTouched: number }[] = [];
    for (const b of [128, 64, 32, 16, 8, 4, 2, 1].filter((x) => x <= B)) {
      let bytes = 0, secs = 0, touched = 0;
      for (let s = 0; s < nSlices; s++) {
        t0 = performance.now();
        const g = native().netTrainSlice(net.spec, data, pick(b), { mode: 3, ...ADAM, gradScale: 1 / B, seed: 1000 + s }, new Float64Array(4))!;
        secs += (performance.now() - t0) / 1000;
        g.forEach((x, k) => {
          if (!sparse[k]) return;
          bytes += x.ids.byteLength + x.rows.byteLength + (x.rowBias ? x.rowBias.byteLength : 0);
          touched += x.ids.length;
        });
      }
      rows.push({ b, bytes: bytes / nSlices, gradSeconds: secs / nSlices, rowsTouched: touched / nSlices });
    }
    let weights = 0;
    for (const l of layers) weights += l.weights.byteLength + l.bias.byteLength;

    const links = [10, 25, 100];
    const ranks = [1, 2, 4, 8, 16, 32, 64];
    const trials = a.trials;
    const model = (R: number, b: number) => {
      const c = stepCost(R, b, trials);
      const T = (link: number) => c.grad + perByte * c.applied + (c.received * 8) / (link * 1e9) + 3 * (R > 1 ? R - 1 : 0) * latency + rb * rebuildsPerStep;
      return { R, b, bytesPerStep: c.volume, bytesReceived: c.received, reducedLayers: c.reduced, seconds: Object.fromEntries(links.map((l) => [l, T(l)])),
        samplesPerSec: Object.fromEntries(links.map((l) => [l, (b * R) / T(l)])) };
    };
    const strong = ranks.filter((R) => B % R === 0).map((R) => model(R, B / R));
    const weak = ranks.map((R) => model(R, B));
    const result = {
      bench: 'distributed-cost', cpu: cpus()[0]?.model ?? 'unknown', batch: B, weightsBytes: weights,
      measured: { perLocalBatch: rows, applySecondsPerByte: perByte, rebuildSeconds: rb, rebuildsPerStep, latencySeconds: latency },
      strong, weak,
    };
    if (!a.json) {
      const f = (x: number) => Math.round(x).toLocaleString('en-US');
      process.stdout.write(`measured on ${result.cpu}, one thread; weights ${(weights / 1e6).toFixed(0)} MB\n`);
      process.stdout.write('| local batch | rows touched | gradient rows | grad ms |\n|---|---|---|---|\n');
      for (const r of rows) process.stdout.write(`| ${r.b} | ${f(r.rowsTouched)} | ${(r.bytes / 1e6).toFixed(2)} MB | ${(1000 * r.gradSeconds).toFixed(2)} |\n`);
      process.stdout.write(`apply ${(perByte * 1e9).toFixed(2)} ns/byte; rebuild ${rb.toFixed(2)} s x ${rebuildsPerStep.toFixed(4)} per step\n\n`);
      for (const [name, tab] of [[`strong scaling (global batch ${B})`, strong], [`weak scaling (${B} per rank)`, weak]] as const) {
        process.stdout.write(`${name}\n| ranks | bytes per step | % of weights | received per rank | layers summed | samples/s at 10 Gb/s | 25 Gb/s | 100 Gb/s |\n|---|---|---|---|---|---|---|---|\n`);
        for (const r of tab) process.stdout.write(`| ${r.R} | ${(r.bytesPerStep / 1e6).toFixed(1)} MB | ${(100 * r.bytesPerStep / weights).toFixed(1)}% | ${(r.bytesReceived / 1e6).toFixed(1)} MB | ${r.reducedLayers.toFixed(1)} | ${f(r.samplesPerSec[10]!)} | ${f(r.samplesPerSec[25]!)} | ${f(r.samplesPerSec[100]!)} |\n`);
        process.stdout.write('\n');
      }
    }
    process.stdout.write(JSON.stringify(result) + '\n');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

await benchMain(import.meta.url, distributedCostCmd, 'npm run bench:distributed-cost --');
