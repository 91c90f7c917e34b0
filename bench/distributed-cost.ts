// Cost model of `train --distributed` at the Amazon-670K shape: measures, on this machine and in this
// process (one thread), what one rank does per global step as a function of its share of the batch, then
// predicts samples/s for R ranks on links of 10, 25 and 100 Gb/s.
//
//   npm run bench:distributed-cost -- [--train 30000] [--batch 128] [--warm 200] [--slices 40] [--latency-us 20] [--json]
//
// Measured per local batch b = B / R (slices of b points drawn from the data, after `warm` batches of
// ordinary training so that the tables and the active sets look like a trained network's):
//   m(b)   bytes of a rank's packed gradient rows (exactly what DistributedExecutor sends),
//   g(b)   seconds of the sparse-gradient pass (training mode 3) on one thread,
//   a      seconds per byte of applying gathered rows (netApplyRows),
//   rb     seconds of one hash-table rebuild (every rank rebuilds its own tables).
// Model of one global step on R ranks (strong scaling: the global batch B is fixed, each rank takes B / R):
//   G(R) = R m(B/R)                                   bytes every rank holds after the allgatherv
//   T(R) = g(B/R) + a G(R) + (R - 1)/R G(R) / link + 2 (R - 1) latency + rb * rebuildsPerStep
// (ring allgatherv: each rank receives the R - 1 other ranks' messages; the dense all-reduce of layer 0's
// bias is 512 bytes and ignored), and samples/s = B / T(R). Weak scaling (`--batch` B R, each rank keeps B
// points) replaces B/R by B and B by B R. The model assumes one core per rank and no overlap of the
// exchange with computation (the implementation does not overlap them).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir, cpus } from 'node:os';
import { join } from 'node:path';
import { generateSynthetic, readXC } from '../datasets/index.js';
import { toShared } from '../datasets/csr.js';
import { defaultConfig } from '../src/network/config.js';
import { Network } from '../src/network/network.js';
import { native } from '../src/native.js';
import type { RowUpdate } from '../src/network/native-types.js';
import { InlineExecutor } from '../src/train/executor.js';
import { labelFrequencies } from '../src/train/metrics.js';
import { sharedSetLogQ } from '../src/train/logq.js';
import { Xoshiro128 } from '../src/util/rng.js';
import { parseBenchArgs, num } from './args.js';

const ADAM = { lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8 };

async function main() {
  const a = parseBenchArgs(process.argv.slice(2));
  const B = num(a, 'batch', 128), warm = num(a, 'warm', 200), nSlices = num(a, 'slices', 40);
  const latency = num(a, 'latency-us', 20) * 1e-6;
  const rebuildsPerStep = num(a, 'rebuilds-per-step', 3 / 235);
  const dir = await mkdtemp(join(tmpdir(), 'sublinear-dcost-'));
  try {
    await generateSynthetic({ shape: 'amazon-670k', train: num(a, 'train', 30000), test: 0, seed: 7, outDir: dir });
    const data = toShared(await readXC(join(dir, 'train.txt')));
    const config = defaultConfig({ features: data.features, labels: data.labels, points: data.points }, 1);
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
    const rows: { b: number; bytes: number; gradSeconds: number; rowsTouched: number }[] = [];
    let applyBytes = 0, applySeconds = 0;
    for (const b of [128, 64, 32, 16, 8, 4, 2, 1].filter((x) => x <= B)) {
      let bytes = 0, secs = 0, touched = 0;
      for (let s = 0; s < nSlices; s++) {
        const pts = pick(b);
        t0 = performance.now();
        const g = native().netTrainSlice(net.spec, data, pts, { mode: 3, ...ADAM, gradScale: 1 / B, seed: 1000 + s }, new Float64Array(4))!;
        secs += (performance.now() - t0) / 1000;
        let m = 40;
        g.forEach((x, k) => {
          if (k >= 1 && !layers[k]!.sampling) return; // dense layers go through the all-reduce
          m += 4 + x.ids.byteLength + x.rows.byteLength + (x.rowBias ? x.rowBias.byteLength : 0);
          touched += x.ids.length;
        });
        bytes += Math.ceil(m / 8) * 8;
        if (b === B) {
          const updates: RowUpdate[] = g.map((x, layer) => ({ layer, ...x }));
          t0 = performance.now();
          native().netApplyRows(net.spec, ADAM, updates);
          applySeconds += (performance.now() - t0) / 1000;
          applyBytes += m;
        }
      }
      rows.push({ b, bytes: bytes / nSlices, gradSeconds: secs / nSlices, rowsTouched: touched / nSlices });
    }
    const perByte = applySeconds / Math.max(1, applyBytes);
    let weights = 0;
    for (const l of layers) weights += l.weights.byteLength + l.bias.byteLength;
    const at = (b: number) => rows.find((r) => r.b === b)!;

    const links = [10, 25, 100];
    const ranks = [1, 2, 4, 8, 16, 32, 64];
    const step = (R: number, b: number, link: number) => {
      const r = at(b);
      const G = R * r.bytes;
      return { G, T: r.gradSeconds + perByte * G + ((R - 1) / R) * G * 8 / (link * 1e9) + 2 * (R - 1) * latency + rb * rebuildsPerStep };
    };
    const strong = ranks.filter((R) => B % R === 0 && rows.some((r) => r.b === B / R)).map((R) => ({
      R, b: B / R, bytesPerStep: step(R, B / R, 10).G,
      samplesPerSec: Object.fromEntries(links.map((l) => [l, B / step(R, B / R, l).T])),
    }));
    const weak = ranks.map((R) => ({
      R, b: B, bytesPerStep: step(R, B, 10).G,
      samplesPerSec: Object.fromEntries(links.map((l) => [l, (B * R) / step(R, B, l).T])),
    }));
    const result = {
      bench: 'distributed-cost', cpu: cpus()[0]?.model ?? 'unknown', batch: B, weightsBytes: weights,
      measured: { perLocalBatch: rows, applySecondsPerByte: perByte, rebuildSeconds: rb, rebuildsPerStep, latencySeconds: latency },
      strong, weak,
    };
    if (!a.json) {
      const f = (x: number) => Math.round(x).toLocaleString('en-US');
      process.stdout.write(`measured on ${result.cpu}, one thread; weights ${(weights / 1e6).toFixed(0)} MB\n`);
      process.stdout.write('| local batch | rows touched | bytes sent | grad ms |\n|---|---|---|---|\n');
      for (const r of rows) process.stdout.write(`| ${r.b} | ${f(r.rowsTouched)} | ${(r.bytes / 1e6).toFixed(2)} MB | ${(1000 * r.gradSeconds).toFixed(2)} |\n`);
      process.stdout.write(`apply ${(perByte * 1e9).toFixed(2)} ns/byte; rebuild ${rb.toFixed(2)} s x ${rebuildsPerStep.toFixed(4)} per step\n\n`);
      for (const [name, tab] of [[`strong scaling (global batch ${B})`, strong], [`weak scaling (${B} per rank)`, weak]] as const) {
        process.stdout.write(`${name}\n| ranks | bytes gathered per step | % of weights | samples/s at 10 Gb/s | 25 Gb/s | 100 Gb/s |\n|---|---|---|---|---|---|\n`);
        for (const r of tab) process.stdout.write(`| ${r.R} | ${(r.bytesPerStep / 1e6).toFixed(1)} MB | ${(100 * r.bytesPerStep / weights).toFixed(1)}% | ${f(r.samplesPerSec[10]!)} | ${f(r.samplesPerSec[25]!)} | ${f(r.samplesPerSec[100]!)} |\n`);
        process.stdout.write('\n');
      }
    }
    process.stdout.write(JSON.stringify(result) + '\n');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  process.stderr.write(`bench/distributed-cost: ${e instanceof Error ? e.message : e}\n`);
  process.exit(1);
});
