// The timing probe behind `sublinear plan`: measures this machine's costs per unit of work with the real
// kernels on a small network of the planned widths, and caches them per CPU and widths.
//
// A probe network keeps the planned layer widths, sampling and wide part, but at most `probeBytes` of
// weights and Adam moments per layer (input features and output labels; default min(1.1 GB, 5% of the
// machine's memory), so the Amazon-670K shape is probed at its full size: a layer of 65,536 rows was
// measured 25-35% faster per row than the real 670,091, the rows staying closer in the caches). Its batches are timed with netTrainSlice (mode 0) after a warm-up, each the fastest of `repeats`
// timings (the least disturbed by other work on the machine; each the least of its wall-clock and CPU time, so
// that time spent waiting for a core while other processes ran is not counted: `stopwatch`), varying one factor
// at a time:
//   B: no wide part, on seeded synthetic points of the shape's mean counts   C: B with 3x the active set
//   E1, E2: a 64-label output, nnz and nnz / 4 nonzeros per point (the layers below the output)
//   BW, A: B and the planned wide part on the data's first points (when the data is given)
// per-sample time t = lowerPerMac x lowerMacs + outputPerMac x outputMacs + widePerPair x widePairs + perSample:
//   outputPerMac = (tC - tB) / (outC - outB), lowerPerMac = (tE1 - tE2) / (lowE1 - lowE2),
//   widePerPair = (tA - tBW) / wide pairs scanned, perSample = tBW - the rest.
// Then: two rebuilds (B's tables, and B's rows in tables of 2^10 buckets) give the per-(row, table) and
// per-bucket costs; fit() epochs with 1 and W workers the training loop's own per-sample cost and the
// parallel efficiency; netApplyRows of mode-3 gradients the apply cost per float (as bench:distributed-cost).
// Last, a label-sharded rank (probeShard): ShardedModel.step of rank 0 of 2 on the probe network's label and
// feature slices, the exchange replaced by local copies, its phases timed by the step's own counters:
//   SB: the planned active set; SC: 3x it (outputPerMac);
//   SL, SD: the data's first points and every 4th nonzero of them (lowerPerMac, lowerPerSample);
//   SA: SL with the planned wide part (widePerPair); perSample = SL's step less the rest;
//   the spread of the segments between the step's collectives over 64 steps of the planned network
//   (spreadPerSample: the plan's waits for the slowest rank).
import { cpus, homedir, totalmem } from 'node:os';
import { join, dirname } from 'node:path';
import { mkdir, readFile } from 'node:fs/promises';
import { Network } from '../network/network.js';
import type { ResolvedNetworkConfig, NetworkConfig } from '../network/config.js';
import type { RowUpdate } from '../native/network-types.js';
import { native } from '../native/addon.js';
import { writeFileAtomic } from '../util/atomic-write.js';
import { probeDataset, workload, type Calibration, type DataShape, type ShardCalibration } from './plan.js';
import { allocateRank, buildSliceWide, featureFrequencies, ShardedModel, shardFeatures, shardLabels } from './sharded.js';
import { abandon, probeBarrier, probeComm } from './probe-comm.js';
import type { ProbeRankInput } from './probe-rank.js';
import { Worker } from 'node:worker_threads';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { packageRoot } from '../util/package-root.js';
import { sharedFloat32, sharedUint32, type SparseDataset } from '../datasets/csr.js';
import { InlineExecutor, PoolExecutor } from '../network/executor.js';
import { labelFrequencies } from '../network/metrics.js';
import { sharedSetLogQ } from './logq.js';
import { buildWide, emptyWide } from '../network/wide.js';
import { subset } from '../datasets/split-reader.js';
import { fit } from './fit-network.js';

/**
 * A stopwatch of the calling thread's work: seconds since `start()`, the least of the wall-clock time and the
 * process's CPU time. The probe's timed parts run on one thread, so on an idle machine the two agree; when
 * other processes share the cores, the wall clock also counts the time this one waited for a core, which
 * the CPU time leaves out: the probe then still measures what the machine does when the job has it.
 */
export function stopwatch(): { start: () => void; seconds: () => number; ratio: (threads?: number) => number } {
  let w0 = 0, c0 = 0;
  const cpu = () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1e6;
  };
  return {
    start: () => {
      w0 = performance.now() / 1000;
      c0 = cpu();
    },
    seconds: () => Math.min(performance.now() / 1000 - w0, cpu() - c0),
    /** CPU time over `threads` x the wall time since start(), at most 1: the share of the wall time its threads ran. */
    ratio: (threads = 1) => Math.min(1, (cpu() - c0) / Math.max(1e-9, threads * (performance.now() / 1000 - w0))),
  };
}

/** Groups of the co-located probe's steps (probeShard): the factor is the median group's. */
const CO_GROUPS = 5;

/** Default bytes of weights and moments per probe layer: min(1.1 GB, 5% of the machine's memory). */
export function defaultProbeBytes(): number {
  return Math.floor(Math.min(1.1e9, 0.05 * totalmem()));
}

export interface CalibrateOptions {
  /** The planned network (its widths, sampling and wide part are probed). */
  config: ResolvedNetworkConfig;
  /** The planned data's shape (its mean nonzeros and labels per point). */
  shape: DataShape;
  /** Batch size. Default 128. */
  batch?: number;
  /** Threads of the parallel probe. Default: this machine's cores. */
  cores?: number;
  /**
   * Bytes of weights and Adam moments per probe layer at most (rows beyond are cut). Default
   * min(1.1 GB, 5% of the machine's memory); the probe holds about three such networks at once.
   */
  probeBytes?: number;
  /** Target seconds of one probe run. Default 0.4 (the whole probe takes about 12 times that). */
  seconds?: number;
  /** Runs of each variant (the fastest is kept). Default 2. */
  repeats?: number;
  /** Resident memory of the process before anything was read or allocated (the plan adds its parts to it). Default: the RSS when calibrate starts. */
  baseRssBytes?: number;
}

/** ShardCalibration.coLocatedBarrier of this probe: its threads poll, then sleep, at the barrier. */
const CO_LOCATED_BARRIER = 2;

/** The key of a calibration in the cache: CPU, kernel ISA and the probed widths. */
export function calibrationKey(config: ResolvedNetworkConfig): string {
  const L = config.layers;
  const H = L.length > 1 ? L.at(-2)!.size : config.inputDim;
  return `${cpus()[0]?.model ?? 'unknown'}|${native().netKernelIsa}|H0=${L[0]!.size}|H=${H}|${L.at(-1)!.sampling ? 'sampled' : 'dense'}|${L.at(-1)!.wide ? 'wide' : 'nowide'}`;
}

/** Default calibration cache: $SUBLINEAR_CACHE_DIR/calibration.json, else ~/.cache/sublinear/calibration.json. */
export function defaultCalibrationFile(): string {
  const dir = process.env.SUBLINEAR_CACHE_DIR || join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'sublinear');
  return join(dir, 'calibration.json');
}

/** A cached calibration for this network on this machine, or null (no file, no entry, or an unreadable file). */
export async function readCachedCalibration(config: ResolvedNetworkConfig, file = defaultCalibrationFile()): Promise<Calibration | null> {
  try {
    const all = JSON.parse(await readFile(file, 'utf8')) as Record<string, Calibration>;
    const c = all?.[calibrationKey(config)];
    // An entry from before the sharded phases were timed (no `shard`), before worker threads' memory was
    // measured (no `workerRss`), or before the co-located probe's threads slept at their barrier
    // (coLocatedBarrier), is measured again.
    return c && typeof c.lowerPerMac === 'number' && typeof c.shard?.lowerPerMac === 'number' && typeof c.shard.spreadPerSample === 'number' && typeof c.shard.coLocated === 'number' && c.shard.coLocatedBarrier === CO_LOCATED_BARRIER &&
      typeof c.workerRss?.first === 'number' && typeof c.workerRss.next === 'number' ? c : null;
  } catch {
    return null;
  }
}

/** Stores a calibration in the cache file (atomically; other entries kept). */
export async function writeCachedCalibration(config: ResolvedNetworkConfig, cal: Calibration, file = defaultCalibrationFile()): Promise<void> {
  let all: Record<string, Calibration> = {};
  try {
    const parsed = JSON.parse(await readFile(file, 'utf8')) as unknown;
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) all = parsed as Record<string, Calibration>;
  } catch {
    // no cache yet, or an unreadable one: replaced
  }
  all[calibrationKey(config)] = cal;
  await mkdir(dirname(file), { recursive: true });
  await writeFileAtomic(file, [Buffer.from(JSON.stringify(all, null, 1) + '\n')]);
}

/**
 * Measures this machine's costs for `config` (see the file comment). Takes a few seconds to a minute and
 * holds up to three probe networks of `probeBytes` per layer plus their hash tables (8.7 GB at the
 * Amazon-3M shape with a 1,024-wide hidden layer).
 */
export async function calibrate(o: CalibrateOptions): Promise<Calibration> {
  const t0 = performance.now();
  const baseRssBytes = o.baseRssBytes ?? process.memoryUsage().rss;
  // Before anything of the probe is allocated, so that the deltas are the threads' own.
  const workerRss = await measureWorkerRss();
  const batch = o.batch ?? 128;
  const cores = o.cores ?? cpus().length;
  const repeats = o.repeats ?? 2;
  const target = o.seconds ?? 0.4;
  const c = o.config;
  const L = c.layers;
  const H0 = L[0]!.size;
  const out = L.at(-1)!;
  const H = L.length > 1 ? L.at(-2)!.size : c.inputDim;
  const probeBytes = o.probeBytes ?? defaultProbeBytes();
  const rowsCap = (width: number) => Math.max(4096, Math.floor(probeBytes / (12 * width)));
  const Dp = Math.min(c.inputDim, rowsCap(H0));
  const Np = Math.min(out.size, rowsCap(H));
  const avgNnz = Math.min(Dp, o.shape.nnz / o.shape.points), avgLabels = Math.min(Np, Math.max(1, o.shape.labelNnz / o.shape.points));
  const planned = workload(c, o.shape, batch);
  // The probe's active set: the planned one, at most a quarter of the probe's labels (variant C triples it).
  // (The wide part's hard negatives come on top of the shared set: not part of its fill.)
  const active = Math.max(1, Math.min(Math.floor(Np / 4), Math.round(planned.active) - (L.at(-1)!.wide?.negatives ?? 0)));
  const probeConfig = (wide: boolean, outSize = Np, rangeBits?: number): NetworkConfig => ({
    inputDim: Dp, seed: 1,
    layers: L.map((l, k) => {
      if (k < L.length - 1) return { size: l.size, activation: l.activation, dropout: l.dropout };
      return {
        size: outSize, activation: 'softmax' as const,
        ...(l.sampling ? { sampling: { ...l.sampling, minActive: Math.min(outSize, active), budget: l.sampling.budget, ...(rangeBits !== undefined ? { rangeBits } : {}) } } : {}),
        ...(l.wide && wide ? { wide: l.wide } : {}),
      };
    }),
  });
  const adam = { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8 };
  const points = 64 * batch;
  const data = probeDataset({ points, features: Dp, labels: Np, avgNnz, avgLabels, seed: 7 });
  const sparse = probeDataset({ points, features: Dp, labels: Np, avgNnz: Math.max(1, avgNnz / 4), avgLabels, seed: 8 });
  /** A probe network with its tables, logQ and wide part as fit() sets them up. */
  const build = async (wide: boolean, outSize = Np, rangeBits?: number): Promise<Network> => {
    const net = new Network(probeConfig(wide, outSize, rangeBits));
    const last = net.spec.layers.at(-1)!;
    const sc = net.config.layers.at(-1)!.sampling;
    if (sc) {
      await net.rebuildTables(new InlineExecutor());
      if (sc.logQ && outSize === Np) last.sampling!.logQ = sharedSetLogQ(labelFrequencies(data.labelIndices, last.outDim), data.points, batch, sc.minActive);
    }
    const wc = net.config.layers.at(-1)!.wide;
    if (wc) last.wide = buildWide(data, null, Dp, last.outDim, wc.maxPerLabel, wc.init, wc.minShare);
    native().netPrefault(net.spec); // as fit() and the sharded ranks do before their first step
    return net;
  };
  let seed = 1;
  /** Seconds per sample of mode-0 batches on `net` (the fastest of `repeats` timings, after a warm-up that touches the rows). */
  const time = (net: Network, d = data, nBatches?: number): { perSample: number; active: number } => {
    const stats = new Float64Array(4);
    const step = () => {
      const start = (seed * batch) % (d.points - batch);
      const ids = Uint32Array.from({ length: batch }, (_, i) => start + i);
      native().netTrainSlice(net.spec, d, ids, { mode: 0, ...adam, gradScale: 1 / batch, seed: seed++, ...(net.wideLr !== undefined ? { wideLr: net.wideLr } : {}) }, stats);
      return stats[2]! / Math.max(1, stats[1]!);
    };
    for (let i = 0; i < 4; i++) step();
    let n = nBatches ?? 4;
    const sw = stopwatch();
    if (nBatches === undefined) {
      sw.start();
      for (let i = 0; i < 2; i++) step();
      const per = sw.seconds() / 2;
      n = Math.max(2, Math.min(60, Math.round(target / Math.max(1e-6, per))));
    }
    let best = Infinity, act = 0;
    for (let r = 0; r < repeats; r++) {
      sw.start();
      act = 0;
      for (let i = 0; i < n; i++) act += step();
      best = Math.min(best, sw.seconds() / (n * batch));
    }
    return { perSample: best, active: act / n };
  };
  const Hp = H;
  const lowerOf = (d: SparseDataset) => {
    let m = (d.offsets[d.points]! / d.points) * H0;
    for (let k = 1; k < L.length - 1; k++) m += L[k - 1]!.size * L[k]!.size;
    return m;
  };
  // The data whose per-sample costs are predicted: the head of the real data when given (ids folded into the
  // probe's dimensions), else the synthetic points.
  const real = o.shape.head && o.shape.head.points >= 4 * batch ? foldIds(o.shape.head, Dp, Np, 32 * batch) : null;
  const dataW = real ?? data;
  // The wide part is chosen on every point of the head (as the plan's scan estimate is): a part chosen on the
  // timed points alone holds a few pairs per label, so a sample would scan about 10 instead of the ~1,600 of
  // the real one (Amazon-670K shape), and the fixed costs of having a wide part would be priced per pair.
  const wideOn = real && o.shape.head!.points > real.points ? foldIds(o.shape.head!, Dp, Np, o.shape.head!.points) : dataW;
  /** A probe network with its tables, logQ and wide part (chosen on `on`) as fit() sets them up. */
  const build2 = async (on: SparseDataset): Promise<Network> => {
    const net = await build(true);
    const wc = c.layers.at(-1)!.wide!;
    net.spec.layers.at(-1)!.wide = buildWide(on, null, Dp, Np, wc.maxPerLabel, wc.init, wc.minShare);
    native().netPrefault(net.spec);
    return net;
  };
  const netB = await build(false);
  const B = time(netB);
  // The layers below the output: timed on a network with a 64-label output, so that they are most of the
  // work, with nnz and nnz / 4 nonzeros per point.
  const netL = await build(false, Math.min(64, Np));
  const lowData = foldIds(data, Dp, Math.min(64, Np), data.points), lowSparse = foldIds(sparse, Dp, Math.min(64, Np), sparse.points);
  const E1 = time(netL, lowData), E2 = time(netL, lowSparse);
  let C: { perSample: number; active: number };
  let netC: Network | null = null;
  if (out.sampling) {
    const q = netB.spec.layers.at(-1)!.sampling!.query;
    const before = q.minActive;
    q.minActive = Math.min(Np, 3 * before);
    C = time(netB);
    q.minActive = before;
  } else {
    netC = await build(false, Math.min(4 * Np, Np + Math.max(64, Np)));
    C = time(netC);
  }
  const outB = (out.sampling ? B.active : Np) * Hp, outC = (out.sampling ? C.active : netC!.config.layers.at(-1)!.size) * Hp;
  const pos = (x: number, floor: number) => (Number.isFinite(x) && x > floor ? x : floor);
  const outputPerMac = pos((C.perSample - B.perSample) / (outC - outB), 1e-13);
  const lowB = lowerOf(data), lowD = lowerOf(sparse);
  const lowerPerMac = pos((E1.perSample - E2.perSample) / (lowB - lowD), 1e-13);
  // The wide part's cost per scanned pair and the rest per sample, on the predicted data: A and BW are
  // timed in turns, three times each, the fastest of each kept (a difference of two timings is what other
  // work on the machine disturbs most).
  let BW = real ? time(netB, dataW) : B;
  let widePerPair = 0;
  if (out.wide) {
    const netA = await build2(wideOn);
    let A = time(netA, dataW);
    for (let i = 0; i < 2; i++) {
      const bw = time(netB, dataW), a = time(netA, dataW);
      if (bw.perSample < BW.perSample) BW = bw;
      if (a.perSample < A.perSample) A = a;
    }
    const w = netA.spec.layers.at(-1)!.wide!;
    let sum = 0;
    for (let q = 0; q < dataW.offsets[dataW.points]!; q++) sum += w.offsets[dataW.indices[q]! + 1]! - w.offsets[dataW.indices[q]!]!;
    const pairs = sum / dataW.points;
    widePerPair = pairs > 0 ? pos((A.perSample - BW.perSample) / pairs, 0) : 0;
  }
  let perSample = pos(BW.perSample - lowerPerMac * lowerOf(dataW) - outputPerMac * (out.sampling ? BW.active : Np) * Hp, 0);
  if (process.env.SUBLINEAR_PROBE_DEBUG) process.stderr.write(`probe ${JSON.stringify({ B, C, E1, E2, BW, real: !!real, lowB, lowD, outB, outC })}\n`);

  // A rebuild costs a part per bucket (clearing and filling the tables' arrays) and a part per (row, table):
  // timed on network B and on one with a quarter of its rows.
  let rebuildPerRowTable = 0, rebuildPerBucket = 0;
  if (out.sampling) {
    const timeRebuild = async (net: Network) => {
      let best = Infinity;
      const sw = stopwatch();
      for (let r = 0; r < repeats; r++) {
        sw.start();
        await net.rebuildTables(new InlineExecutor());
        best = Math.min(best, sw.seconds());
      }
      return best;
    };
    // The per-row part on tables of 2^10 buckets (their own cost negligible), the per-bucket part from B's.
    const rB = await timeRebuild(netB), rS = await timeRebuild(await build(false, Np, Math.min(10, out.sampling.rangeBits)));
    const tables = out.sampling.L, buckets = tables * 2 ** out.sampling.rangeBits;
    rebuildPerRowTable = pos(rS / (Np * tables), 0);
    rebuildPerBucket = pos((rB - rS) / buckets, 0);
  }

  // The training loop's own cost per sample (the pool, batching) and the parallel efficiency: fit() on the
  // warmed network B with one worker and with every core.
  // Two epochs on the warmed network B; the second is timed (the first starts the worker threads). Each
  // epoch takes about `target` seconds.
  const fitPoints = Math.max(4 * batch, Math.min(dataW.points, Math.round(target / Math.max(1e-7, BW.perSample) / batch) * batch));
  const fitData = fitPoints === dataW.points ? dataW : subset(dataW, Uint32Array.from({ length: fitPoints }, (_, i) => i));
  // The second epoch's wall time, scaled by the share of the run's wall time its threads had the cores (the
  // CPU time over `workers` x the wall time; the worker threads do all but the batching).
  const fitRun = async (workers: number, threads = 1) => {
    const sw = stopwatch();
    sw.start();
    const st = await fit(netB, fitData, { epochs: 2, batchSize: batch, workers, threads, validation: false, inputScaling: 'off', rebuild: { first: 1e9, maxInterval: 1e9 } });
    // (Intra-batch threads are idle in a batch's serial parts: their run is taken as timed.)
    const share = threads > 1 ? 1 : sw.ratio(Math.min(workers, cores));
    const h = st.history;
    return ((h[1]!.trainSeconds - h[0]!.trainSeconds) / fitData.points) * share;
  };
  const f1 = Math.min(await fitRun(1), await fitRun(1));
  perSample += Math.max(0, f1 - BW.perSample);
  let parallelEfficiency = 1;
  let threadSpeedup: number | undefined;
  const W = Math.max(1, cores);
  if (W > 1) {
    const fW = Math.min(await fitRun(W), await fitRun(W));
    parallelEfficiency = Math.min(1, Math.max(0.05, f1 / fW / W));
    // A dense output layer trains on one worker whose batches the cores share (FitOptions.threads).
    if (!out.sampling) {
      const fT = Math.min(await fitRun(1, W), await fitRun(1, W));
      threadSpeedup = Math.min(W, Math.max(0.2, f1 / fT));
    }
  }

  // netApplyRows per float (lazy Adam of exchanged rows), on network B.
  let floats = 0, secs = 0;
  const swApply = stopwatch();
  for (let s = 0; s < 8; s++) {
    const ids = Uint32Array.from({ length: batch }, (_, i) => s * batch + i);
    const g = native().netTrainSlice(netB.spec, data, ids, { mode: 3, ...adam, gradScale: 1 / batch, seed: s }, new Float64Array(4))!;
    swApply.start();
    native().netApplyRows(netB.spec, adam, g.map((x, layer) => ({ layer, ...x }) as RowUpdate));
    secs += swApply.seconds();
    for (const x of g) floats += x.rows.length;
  }
  const applyPerFloat = floats > 0 ? secs / floats : 0;
  if (process.env.SUBLINEAR_PROBE_DEBUG) process.stderr.write(`probe fit ${JSON.stringify({ f1, parallelEfficiency })}\n`);
  const shard = await probeShard({ probeConfig, data, sparse, dataW, wideOn, batch, target, repeats, active, dense: !out.sampling, wide: !!out.wide, Np, cores });
  return {
    cpu: cpus()[0]?.model ?? 'unknown', hidden: H, lowerPerMac, outputPerMac, widePerPair, perSample, applyPerFloat, rebuildPerRowTable, rebuildPerBucket,
    shard, parallelEfficiency, parallelWorkers: W, ...(threadSpeedup !== undefined ? { threadSpeedup } : {}), baseRssBytes, workerRss, probeSeconds: (performance.now() - t0) / 1000,
  };
}

/**
 * Resident memory a training process's worker threads add (Calibration.workerRss): pools of one and of two
 * workers are started as fit() starts its pool, until every worker has loaded the worker module and the addon
 * (a rendezvous of all of them), and the process's RSS is read before and after. A worker is a V8 isolate
 * with its own Node environment, heap and module graph; the first also brings what the pool shares (measured
 * on the 2-vCPU AMD EPYC, Node 20: 9.9 to 11.0 MiB for the first, 6.0 to 7.2 MiB for the second).
 */
export async function measureWorkerRss(): Promise<{ first: number; next: number }> {
  const pool = async (n: number) => {
    const before = process.memoryUsage().rss;
    const ex = new PoolExecutor(n);
    try {
      await ex.rendezvous(n);
      return Math.max(0, process.memoryUsage().rss - before);
    } finally {
      await ex.close();
    }
  };
  const one = await pool(1), two = await pool(2);
  return { first: one, next: Math.max(0, two - one) };
}

/** Ranks the sharded probe stands for (it runs rank 0 of them). */
const PROBE_RANKS = 2;

/** The compiled probe-rank worker (probe-rank.ts), next to this module or in dist/; null when neither exists. */
function probeRankFile(): string | null {
  const here = fileURLToPath(new URL('./probe-rank.js', import.meta.url));
  if (existsSync(here)) return here;
  const built = join(packageRoot(), 'dist', 'src', 'train', 'probe-rank.js');
  return existsSync(built) ? built : null;
}

/**
 * The label-sharded costs (Calibration.shard): ShardedModel.step of rank 0 of PROBE_RANKS on the probe
 * network's slices (labels by the probe data's counts, features by their nonzero counts), every phase on the
 * whole batch, timed by the step's counters (lower: phases 1, 2 and 5; output: 3 and 4), each the fastest of
 * `repeats` runs of about `target` seconds. One allocation of the rank's network serves every variant.
 */
async function probeShard(o: {
  probeConfig: (wide: boolean, outSize?: number) => NetworkConfig; data: SparseDataset; sparse: SparseDataset; dataW: SparseDataset; wideOn: SparseDataset;
  batch: number; target: number; repeats: number; active: number; dense: boolean; wide: boolean; Np: number; cores: number;
}): Promise<ShardCalibration> {
  const R = PROBE_RANKS, comm = probeComm(R), batch = o.batch;
  const adam = { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8 };
  /** The global configuration of a variant: the planned active set times `times` (a dense output: `outSize` labels). */
  const variant = (wide: boolean, times = 1, outSize = o.Np): NetworkConfig => {
    const c = o.probeConfig(wide, outSize);
    const last = c.layers.at(-1)!;
    if (last.sampling) last.sampling = { ...last.sampling, minActive: Math.min(Math.floor(outSize / 4), times * o.active) };
    return c;
  };
  const rankOf = (config: NetworkConfig) => {
    const L = config.layers.at(-1)!.size;
    const labelFreq = labelFrequencies(o.data.labelIndices.map((j) => j % L), L), featureFreq = featureFrequencies(o.data, config.inputDim);
    const labels = shardLabels(labelFreq, R).labelsOf[0]!, features = shardFeatures(featureFreq, R).featuresOf[0]!;
    const spec = allocateRank(config, labels.length, features.length);
    native().netPrefault(spec);
    return { spec, labels, labelFreq, featureFreq };
  };
  let seed = 1;
  /** Per sample of the batch: the step, its lower and output phases, and the active rows of the slice. */
  const time = (model: ShardedModel, d: SparseDataset) => {
    model.prepareLogQ(d.points, batch);
    const step = () => {
      const start = (seed * batch) % (d.points - batch);
      model.step(d, { pointIds: Uint32Array.from({ length: batch }, (_, i) => start + i), seed: seed++, ...adam });
    };
    for (let i = 0; i < 4; i++) step();
    const sw = stopwatch();
    sw.start();
    for (let i = 0; i < 2; i++) step();
    const n = Math.max(2, Math.min(60, Math.round(o.target / Math.max(1e-6, sw.seconds() / 2))));
    let best = { step: Infinity, lower: 0, output: 0, active: 0 };
    for (let r = 0; r < o.repeats; r++) {
      const s0 = { ...model.report() };
      sw.start();
      for (let i = 0; i < n; i++) step();
      // The phases' counters are wall-clock times: scaled by the share of the wall time the process ran.
      const secs = sw.seconds(), share = sw.ratio(), s1 = model.report();
      if (secs < best.step * n * batch) {
        best = {
          step: secs / (n * batch), lower: (share * (s1.lowerSeconds - s0.lowerSeconds)) / (n * batch), output: (share * (s1.outputSeconds - s0.outputSeconds)) / (n * batch),
          active: (s1.activePerStep * s1.steps - s0.activePerStep * s0.steps) / n,
        };
      }
    }
    return best;
  };
  const model = (config: NetworkConfig, spec: ReturnType<typeof rankOf>) => new ShardedModel(comm, config, { spec: spec.spec }, spec.labelFreq, spec.featureFreq);
  const cfg = variant(false);
  const rank = rankOf(cfg);
  const H0 = cfg.layers[0]!.size, d = rank.spec.layers.at(-1)!.inDim;
  let mid = 0;
  for (let k = 1; k < cfg.layers.length - 1; k++) mid += cfg.layers[k - 1]!.size * cfg.layers[k]!.size;
  // Layer 0's work on the rank's features: its nonzeros per sample of a dataset.
  const owned = (ds: SparseDataset, features: Uint32Array) => {
    const mine = new Uint8Array(ds.features);
    for (const f of features) mine[f] = 1;
    let n = 0;
    for (let q = 0; q < ds.offsets[ds.points]!; q++) n += mine[ds.indices[q]!]!;
    return n / ds.points;
  };
  const feats = shardFeatures(rank.featureFreq, R).featuresOf[0]!;
  const SB = time(model(cfg, rank), o.data);
  // Layer 0's cost per multiply-add and per sample from the predicted data and the same data with a quarter
  // of its nonzeros (real rows keep their features' frequencies: lazy Adam's rows per multiply-add are the
  // real ones), else the synthetic points and their sparse variant.
  const lowData = o.dataW, lowSparse = o.dataW === o.data ? o.sparse : thinRows(o.dataW, 4);
  const SL = lowData === o.data ? SB : time(model(cfg, rank), lowData);
  const SD = time(model(cfg, rank), lowSparse);
  let SC: ReturnType<typeof time>;
  if (o.dense) {
    const big = variant(false, 1, Math.min(4 * o.Np, o.Np + Math.max(64, o.Np)));
    SC = time(model(big, rankOf(big)), o.data);
  } else {
    const c3 = variant(false, 3);
    SC = time(model(c3, rank), o.data);
  }
  const pos = (x: number, floor: number) => (Number.isFinite(x) && x > floor ? x : floor);
  const macB = owned(lowData, feats) * H0 + mid, macD = owned(lowSparse, feats) * H0 + mid;
  // A slope between two timings is what other work on the machine disturbs most. The phases' fixed parts (the
  // transposes of a few B-row matrices, the bias and activation) are small next to their work per unit, so each
  // slope is kept between `least` and all of the planned point's cost per unit (its time over its units): the
  // rest is the phase's per-sample part.
  const slope = (y: number, y2: number, x: number, x2: number, least: number) => {
    const ratio = pos(y / x, 1e-13), k = (y - y2) / (x - x2);
    return Number.isFinite(k) ? Math.min(ratio, Math.max(least * ratio, k)) : ratio;
  };
  const lowerPerMac = slope(SL.lower, SD.lower, macB, macD, 0.7);
  const lowerPerSample = pos(SL.lower - lowerPerMac * macB, 0);
  const outputPerMac = slope(SB.output, SC.output, SB.active * d, SC.active * d, 0.9);
  // The wide part on the data whose costs are predicted: its pairs for the rank's labels (buildSliceWide),
  // the same network with and without it, in turns.
  let SBW = SL;
  let SA0: ReturnType<typeof time> | null = null;
  let widePerPair = 0;
  if (o.wide) {
    const cw = variant(true);
    const out = rank.spec.layers.at(-1)!;
    out.wide = emptyWide(cw.inputDim);
    buildSliceWide(cw, { spec: rank.spec }, rank.labels, o.wideOn);
    const wide = out.wide!;
    native().netPrefault(rank.spec);
    const withWide = model(cw, rank);
    let SA = time(withWide, o.dataW);
    for (let i = 0; i < 2; i++) {
      delete out.wide;
      const bw = time(model(cfg, rank), o.dataW);
      out.wide = wide;
      const a = time(withWide, o.dataW);
      if (bw.step < SBW.step) SBW = bw;
      if (a.step < SA.step) SA = a;
    }
    let sum = 0;
    for (let q = 0; q < o.dataW.offsets[o.dataW.points]!; q++) sum += wide.offsets[o.dataW.indices[q]! + 1]! - wide.offsets[o.dataW.indices[q]!]!;
    const pairs = sum / o.dataW.points;
    widePerPair = pairs > 0 ? pos((SA.output - SBW.output) / pairs, 0) : 0;
    SA0 = SA;
    if (process.env.SUBLINEAR_PROBE_DEBUG) process.stderr.write(`probe shard wide ${JSON.stringify({ SA, pairs, points: o.dataW.points })}\n`);
  }
  const macW = owned(o.dataW, feats) * H0 + mid;
  const perSample = pos(SBW.step - lowerPerMac * macW - lowerPerSample - outputPerMac * SBW.active * d, 0);
  // The spread of the segments between the step's collectives (ShardedModel.segments), on the planned network
  // (its wide part included): per segment the standard deviation over 4 x 16 steps, summed. Phase 5 and the
  // next step's phase 1 are one segment (no collective between them).
  const planned = o.wide ? model(variant(true), rank) : model(cfg, rank);
  const per: number[][] = [[], [], []];
  let carry = 0;
  for (let i = 0; i < 65; i++) {
    const start = (seed * batch) % (o.dataW.points - batch);
    planned.step(o.dataW, { pointIds: Uint32Array.from({ length: batch }, (_, q) => start + q), seed: seed++, ...adam });
    const g = planned.segments;
    if (i > 0) per[0]!.push(carry + g[0]!);
    per[1]!.push(g[1]!);
    per[2]!.push(g[2]!);
    carry = g[3]!;
  }
  const sd = (x: number[]) => {
    const m = x.reduce((a, b) => a + b, 0) / x.length;
    return Math.sqrt(x.reduce((a, b) => a + (b - m) ** 2, 0) / Math.max(1, x.length - 1));
  };
  // The least of 4 groups of 16 steps: the spread of the work itself, not of other work on the machine that
  // stopped the probe now and then (the plan prices ranks on machines of their own with it; ranks sharing the
  // probe's machine are priced by `coLocated` below, which counts those stops).
  const spreadPerSample = Math.min(...[0, 1, 2, 3].map((q) => per.reduce((a, x) => a + sd(x.slice(16 * q, 16 * q + 16)), 0))) / batch;
  // The planned network's step when another rank shares the machine: rank 1 in a worker thread, the
  // collectives a barrier of the two (polling, then asleep, as the real ranks yield: probe-comm.ts); rank 0's
  // steps by the wall clock (the waits are real time), over its step alone. One core, or no compiled worker: 1.
  let coLocated = 1;
  const file = probeRankFile();
  if (o.cores >= R && file) {
    const config = o.wide ? variant(true) : cfg;
    const alone = (SA0 ?? SBW).step;
    const n = CO_GROUPS * Math.max(4, Math.min(15, Math.round(o.target / CO_GROUPS / Math.max(1e-6, alone * batch)))), warm = 4;
    const barrier = probeBarrier(R);
    const worker = new Worker(file, {
      workerData: { config, data: o.dataW, wideOn: o.wideOn, labelFreq: rank.labelFreq, featureFreq: rank.featureFreq, barrier, steps: warm + n, batch, seed } satisfies ProbeRankInput,
    });
    const message = () => new Promise<string>((resolve) => {
      worker.once('message', (m: string) => resolve(m));
      worker.once('error', (e: Error) => resolve(`error: ${e.message}`));
    });
    try {
      const ready = await message();
      if (ready === 'ready') {
        const twin = new ShardedModel(probeComm(R, 0, barrier), config, { spec: rank.spec }, rank.labelFreq, rank.featureFreq);
        twin.prepareLogQ(o.dataW.points, batch);
        const step = (i: number) => {
          const start = ((seed + i) * batch) % (o.dataW.points - batch);
          twin.step(o.dataW, { pointIds: Uint32Array.from({ length: batch }, (_, q) => start + q), seed: seed + i, ...adam });
        };
        for (let i = 0; i < warm; i++) step(i);
        // The steps by the wall clock, in CO_GROUPS groups: ranks that share a machine also share its stops
        // (other work on the machine stalls one rank, and the other waits for it), which the least disturbed
        // steps would leave out (measured: the fastest third of the steps gave 1.12x where the runs showed 1.5x);
        // the median group, not the mean: a burst of other work during one group moved the whole factor from
        // 1.5 to 5.8 on this shared machine while the 2-rank runs of the same minutes stayed at 1.5.
        const per = n / CO_GROUPS, groups: number[] = [];
        for (let g = 0; g < CO_GROUPS; g++) {
          const t = performance.now();
          for (let i = warm + g * per; i < warm + (g + 1) * per; i++) step(i);
          groups.push((performance.now() - t) / 1000 / (per * batch));
        }
        groups.sort((a, b) => a - b);
        const perSampleCoLocated = (groups[(CO_GROUPS - 1) >> 1]! + groups[CO_GROUPS >> 1]!) / 2;
        await message();
        coLocated = Math.max(1, perSampleCoLocated / alone);
        if (process.env.SUBLINEAR_PROBE_DEBUG) process.stderr.write(`probe shard co-located ${JSON.stringify({ perSampleCoLocated, groups, alone, coLocated })}\n`);
      }
    } catch {
      abandon(barrier); // the worker stopped: the factor stays 1
    } finally {
      await worker.terminate();
    }
    seed += warm + n;
  }
  if (process.env.SUBLINEAR_PROBE_DEBUG) process.stderr.write(`probe shard ${JSON.stringify({ SB, SC, SL, SD, SBW, macB, macD, macW, widePerPair })}\n`);
  return { lowerPerMac, lowerPerSample, outputPerMac, widePerPair, perSample, spreadPerSample, coLocated, coLocatedBarrier: CO_LOCATED_BARRIER };
}

/**
 * `d` with every `k`-th nonzero of each row kept (the first, then every k-th; at least one), labels as they are,
 * on SharedArrayBuffers: the same features' frequencies at 1/k of the nonzeros.
 */
export function thinRows(d: SparseDataset, k: number): SparseDataset {
  const offsets = sharedUint32(d.points + 1);
  let n = 0;
  for (let i = 0; i < d.points; i++) n += Math.ceil((d.offsets[i + 1]! - d.offsets[i]!) / k);
  const indices = sharedUint32(n), values = sharedFloat32(n);
  let p = 0;
  for (let i = 0; i < d.points; i++) {
    for (let q = d.offsets[i]!; q < d.offsets[i + 1]!; q += k) {
      indices[p] = d.indices[q]!;
      values[p++] = d.values[q]!;
    }
    offsets[i + 1] = p;
  }
  return { ...d, offsets, indices, values };
}

/**
 * The first `maxPoints` rows of `d` with feature ids folded below `features` and label ids below `labels`
 * (id mod the dimension; a row's repeated ids merged), on SharedArrayBuffers: real rows for a probe network
 * smaller than the real one.
 */
export function foldIds(d: SparseDataset, features: number, labels: number, maxPoints: number): SparseDataset {
  const n = Math.min(d.points, maxPoints);
  const idx: number[] = [], val: number[] = [], lab: number[] = [];
  const offsets = sharedUint32(n + 1), labelOffsets = sharedUint32(n + 1);
  for (let i = 0; i < n; i++) {
    const fm = new Map<number, number>();
    for (let q = d.offsets[i]!; q < d.offsets[i + 1]!; q++) {
      const f = d.indices[q]! % features;
      fm.set(f, (fm.get(f) ?? 0) + d.values[q]!);
    }
    for (const f of [...fm.keys()].sort((a, b) => a - b)) {
      idx.push(f);
      val.push(fm.get(f)!);
    }
    const ls = new Set<number>();
    for (let q = d.labelOffsets[i]!; q < d.labelOffsets[i + 1]!; q++) ls.add(d.labelIndices[q]! % labels);
    lab.push(...[...ls].sort((a, b) => a - b));
    offsets[i + 1] = idx.length;
    labelOffsets[i + 1] = lab.length;
  }
  const indices = sharedUint32(idx.length), values = sharedFloat32(val.length), labelIndices = sharedUint32(lab.length);
  indices.set(idx);
  values.set(val);
  labelIndices.set(lab);
  return { points: n, features, labels, offsets, indices, values, labelOffsets, labelIndices };
}
