// Data-parallel training across MPI ranks (`mpirun -np R sublinear train ... --distributed`), exchanging
// only the rows a batch touched.
//
// Every rank runs the same training loop (src/train/fit.ts) on the same data with the same seeds, so every
// rank makes the same decisions (epoch order, batch seeds, rebuild schedule, held-out early stopping). A
// global step is one batch of `batchSize` points (the batch size of the run, whatever the number of ranks):
//   1. rank r takes points [r n / R, (r + 1) n / R) of the batch and splits them into one part per local
//      worker; each part computes the gradient rows of the rows it touched (training mode 3, weights not
//      written) with seed batchSeed + g * 0x9e3779b9, g = r * parts + j the part's global index, and the
//      random fill of its batch-shared set from batchSeed itself (one stream for all parts, so their shared
//      sets mostly coincide, as one process's single set would); one rank with one worker therefore trains
//      exactly as a plain run;
//   2. the ids of every part's rows are gathered (MPI_Allgatherv); then, per sparse layer (layer 0's
//      features, sampled layers' active neurons), the rows are either gathered too, or, when twice the
//      union of ids is smaller than their total (rows most ranks touch: the shared set on many ranks),
//      summed over the union by MPI_Allreduce, whichever moves fewer bytes (every rank decides alike from
//      the same ids). Dense layers (every row touched) and layer 0's bias vector join that all-reduce;
//   3. every rank applies lazy Adam (netApplyRows) to the same list of contributions in the same order
//      (gathered rows by rank, then part; then the sums): rows are summed id by id in that order and each
//      distinct row steps once.
// Guarantees: within a rank nothing is HOGWILD (parts only read the weights), so the update of a step is a
// deterministic function of the weights, and replicas stay bit-identical as long as every rank's CPU rounds
// the Adam arithmetic alike and MPI's float sum returns the same value on every rank (Open MPI's does; the
// order of that sum may differ from one process's part order, so R ranks match one process with R parts
// up to float rounding when rows are all-reduced, bit for bit when they are gathered). Hash
// tables are rebuilt on every rank from identical weights with identical seeds. Drift (e.g. ranks on CPUs
// with different instruction sets) is detected by a checksum of the whole training state compared across
// ranks about once an epoch, before any prediction (held-out validation, evaluation) and at the end; a
// mismatch is repaired by broadcasting rank 0's state, and counted in the report.
import { UsageError } from '../util/usage-error.js';
import type { SparseDataset } from '../datasets/csr.js';
import { subset } from '../datasets/split-reader.js';
import { native } from '../native/addon.js';
import { Network, type EvaluateOptions } from '../network/network.js';
import type { NetSpec, RowUpdate } from '../native/network-types.js';
import { checkpointSections } from './checkpoint.js';
import { createExecutor, type Executor } from '../network/executor.js';
import { computeMetrics, inversePropensity, labelFrequencies, type Metrics } from '../network/metrics.js';
import { mpi, type MpiAddon } from './mpi.js';
import type { PredictResult, PredictTask, RehashTask, SparseTrainResult, TrainResult, TrainTask } from '../network/tasks.js';
import { resume, resumeInfo, type ResumeOptions } from './fit-network.js';

/** The collectives the exchange uses (the MPI addon's, or a stand-in with the same semantics). */
export type Comm = Pick<MpiAddon, 'allgatherv' | 'allreduceSum' | 'bcast' | 'barrier' | 'idleBarrier' | 'abort'> & { rank: number; size: number };

/** Per-run exchange statistics (reported by `train --distributed --json`). */
export interface ExchangeStats {
  steps: number;
  /**
   * Mean bytes of a step's gradient messages: every rank's row ids and gathered rows, plus one copy of the
   * all-reduced buffer (summed rows, dense layers, layer 0's bias). What the step exchanges, to compare with
   * the weights (a dense all-reduce would move all of them).
   */
  bytesPerStep: number;
  /** Mean bytes this rank received per step over its link (the others' ids and rows, ~2 (R - 1) / R of the all-reduce). */
  bytesReceived: number;
  /** Mean number of sparse layers per step whose rows were summed by the all-reduce instead of gathered. */
  reducedLayers: number;
  /** Seconds in the gradient pass (mode 3), in the exchange (MPI calls, waiting included) and in the updates. */
  gradSeconds: number;
  exchangeSeconds: number;
  applySeconds: number;
}

/** Cross-rank comparisons of the training state's checksum. */
export interface ChecksumReport {
  /** Comparisons made. */
  checks: number;
  /** Comparisons where some rank's checksum differed from rank 0's (each repaired by a broadcast). */
  mismatches: number;
  /** The last comparison: every rank's checksum (hex), and whether they were all equal. */
  last: { checksums: string[]; identical: boolean } | null;
}

/**
 * 64-bit checksum (two 32-bit lanes, hex) of a network's whole training state: weights, biases, Adam
 * moments, step counters and hash tables (the arrays of a checkpoint). Bit patterns are hashed, so any
 * difference in any float shows.
 */
export function stateChecksum(spec: NetSpec): string {
  let h1 = 0x811c9dc5 | 0, h2 = 0x01000193 | 0;
  for (const [name, a] of Object.entries(checkpointSections(spec, null))) {
    const u = new Uint32Array(a.buffer, a.byteOffset, (a.byteLength / 4) | 0);
    let x1 = Math.imul(h1 ^ name.length, 0x9e3779b1), x2 = Math.imul(h2 ^ u.length, 0x85ebca77);
    const n = u.length;
    let i = 0;
    for (; i + 1 < n; i += 2) {
      x1 = Math.imul(x1 ^ u[i]!, 0x9e3779b1) ^ (x1 >>> 15);
      x2 = Math.imul(x2 ^ u[i + 1]!, 0x85ebca77) ^ (x2 >>> 13);
    }
    if (i < n) x1 = Math.imul(x1 ^ u[i]!, 0x9e3779b1);
    h1 = x1 ^ Math.imul(x2, 0xc2b2ae3d);
    h2 = x2 ^ Math.imul(x1, 0x27d4eb2f);
  }
  return (h1 >>> 0).toString(16).padStart(8, '0') + (h2 >>> 0).toString(16).padStart(8, '0');
}

const PART_SEED_STEP = 0x9e3779b9;

/** Bytes of a packed contribution are padded to this (the Float64 stats header stays aligned). */
const ALIGN = 8;
/** Packed contribution header: 4 Float64 stats, the number of parts (u32) and padding. */
const HEADER_BYTES = 40;

/**
 * The executor that fit() runs on under `--distributed`: train() is one global step (see the file comment);
 * predictions and hash-table rebuilds run on the local pool (identical on every rank). Steps are serialised
 * in call order, which is the batch order on every rank.
 */
export class DistributedExecutor implements Executor {
  readonly parallelism: number;
  readonly stats: ExchangeStats = { steps: 0, bytesPerStep: 0, bytesReceived: 0, reducedLayers: 0, gradSeconds: 0, exchangeSeconds: 0, applySeconds: 0 };
  readonly checks: ChecksumReport = { checks: 0, mismatches: 0, last: null };
  private chain: Promise<unknown> = Promise.resolve();
  private pendingSteps = 0;
  private stepsSinceCheck = 0;
  private verifying: Promise<boolean> | null = null;
  private volumeSum = 0;
  private receivedSum = 0;
  private reducedLayersSum = 0;
  /** Per layer: row -> position in the union being reduced, -1 elsewhere (reset after every step). */
  private readonly marks: (Int32Array | undefined)[] = [];

  /**
   * @param local the rank's own pool (or inline executor) that computes the parts.
   * @param checkEvery steps between state comparisons (about one epoch); 0 compares only before predictions and at the end.
   */
  constructor(
    private readonly local: Executor,
    private readonly comm: Comm,
    private readonly spec: NetSpec,
    private readonly checkEvery: number,
  ) {
    // The exchange carries gradient rows of the layers; the wide part's entries are not rows (mode 3
    // refuses them): say so before the job starts rather than from the first step.
    if (spec.layers.at(-1)!.wide) {
      throw new Error('train --distributed does not support an output layer with a wide part (layers[-1].wide): train it in one process, or leave the wide part out of the --config');
    }
    this.parallelism = local.parallelism;
  }

  /** Steps submitted and not finished, plus the local pool's tasks (checkpoints assert 0). */
  get inFlight(): number {
    return this.pendingSteps + this.local.inFlight;
  }

  /**
   * One global step. A failure is fatal for the job (the other ranks wait in the exchange): there is no
   * retry, and no `signal` (task timeouts, Ctrl-C) is honoured here: under MPI a signal ends the job.
   */
  train(t: TrainTask): Promise<TrainResult> {
    this.pendingSteps++;
    const run = this.chain.then(() => this.step(t)).finally(() => void this.pendingSteps--);
    this.chain = run.catch(() => undefined);
    return run.catch((e: Error) => this.fatal(`a training step failed: ${e.message}`));
  }

  trainSparse(): Promise<SparseTrainResult> {
    throw new Error('DistributedExecutor.trainSparse: not used (train runs whole global steps)');
  }

  async predict(t: PredictTask): Promise<PredictResult> {
    await this.chain;
    // The replicas are compared before the first prediction after training steps (held-out validation
    // decides early stopping on every rank: the ranks must agree). Concurrent predict calls share one check.
    if (this.stepsSinceCheck > 0) {
      this.stepsSinceCheck = 0;
      this.verifying = this.verify();
    }
    if (this.verifying) await this.verifying;
    return this.local.predict(t);
  }

  async rehash(t: RehashTask): Promise<number> {
    await this.chain;
    return this.local.rehash(t);
  }

  async close(): Promise<void> {
    await this.chain.catch(() => undefined);
    await this.local.close();
  }

  /** Mean exchange volume and time so far. */
  report(): ExchangeStats {
    const n = Math.max(1, this.stats.steps);
    return { ...this.stats, bytesPerStep: this.volumeSum / n, bytesReceived: this.receivedSum / n, reducedLayers: this.reducedLayersSum / n };
  }

  /**
   * Compares the state checksum across ranks (a collective: every rank must call it at the same point);
   * on a mismatch, broadcasts rank 0's whole training state. Returns whether the replicas were identical.
   */
  async verify(): Promise<boolean> {
    // Serialised with the steps: a verify queued behind a step sees its update.
    const run = this.chain.then(() => this.verifyNow());
    this.chain = run.catch(() => undefined);
    return run;
  }

  private verifyNow(): boolean {
    this.stepsSinceCheck = 0;
    const mine = stateChecksum(this.spec);
    const g = this.comm.allgatherv(new TextEncoder().encode(mine.padEnd(16, '0').slice(0, 16)));
    const text = new TextDecoder().decode(g.data);
    const all = Array.from({ length: this.comm.size }, (_, r) => text.slice(16 * r, 16 * r + 16));
    const identical = all.every((c) => c === all[0]);
    this.checks.checks++;
    this.checks.last = { checksums: all, identical };
    if (!identical) {
      this.checks.mismatches++;
      for (const a of Object.values(checkpointSections(this.spec, null))) this.comm.bcast(a, 0);
    }
    return identical;
  }

  private fatal(message: string): never {
    process.stderr.write(`sublinear: rank ${this.comm.rank} of ${this.comm.size}: ${message}; aborting the job\n`);
    this.comm.abort(1);
    throw new Error(message); // not reached: MPI_Abort ends the process
  }

  private async step(t: TrainTask): Promise<TrainResult> {
    const { rank, size } = this.comm;
    if (this.checkEvery > 0 && this.stepsSinceCheck >= this.checkEvery) this.verifyNow();
    const layers = this.spec.layers;
    const n = t.pointIds.length;
    const mine = t.pointIds.subarray(Math.floor((rank * n) / size), Math.floor(((rank + 1) * n) / size));
    const parts = Math.max(1, Math.min(this.local.parallelism, mine.length));
    const t0 = performance.now();
    // Every part draws its batch-shared set's random fill from the global batch's seed: the parts' sets are
    // then prefixes of one stream, so they mostly coincide and their rows sum (see the reduce below).
    const results = await Promise.all(
      Array.from({ length: parts }, (_, j) => {
        const ids = mine.subarray(Math.floor((j * mine.length) / parts), Math.floor(((j + 1) * mine.length) / parts));
        const g = rank * parts + j;
        return this.local.trainSparse({ ...t, pointIds: ids, seed: (t.seed + g * PART_SEED_STEP) >>> 0, fillSeed: t.seed >>> 0 });
      }),
    );
    const t1 = performance.now();
    const dense = layers.map((l, k) => k >= 1 && !l.sampling);
    const sparse = layers.map((_, k) => !dense[k]);
    const width = layers.map((l) => (l.inputMajor ? l.outDim : l.inDim));

    // 1. Ids of every part's rows: [Float64 lossSum, samples, activeSum, missed][u32 parts, pad], then per part
    //    and sparse layer [u32 n][n ids], padded to ALIGN bytes; gathered by every rank.
    let idBytes = HEADER_BYTES;
    for (const r of results) layers.forEach((_, k) => { if (sparse[k]) idBytes += 4 + r.grads[k]!.ids.byteLength; });
    const idMsg = new ArrayBuffer(Math.ceil(idBytes / ALIGN) * ALIGN);
    const head = new Float64Array(idMsg, 0, 4);
    for (const r of results) {
      head[0]! += r.lossSum;
      head[1]! += r.samples;
      head[2]! += r.activeSum;
      head[3]! += r.missedLabels;
    }
    new Uint32Array(idMsg, 32, 1)[0] = results.length;
    let off = HEADER_BYTES;
    for (const r of results) layers.forEach((_, k) => {
      if (!sparse[k]) return;
      const ids = r.grads[k]!.ids;
      new Uint32Array(idMsg, off, 1)[0] = ids.length;
      new Uint32Array(idMsg, off + 4, ids.length).set(ids);
      off += 4 + ids.byteLength;
    });
    const g1 = size > 1 ? this.comm.allgatherv(new Uint8Array(idMsg)) : { data: new Uint8Array(idMsg), counts: [idMsg.byteLength] };

    // idsOf[r][j][k]: rank r's part j's row ids of sparse layer k (views into the gathered bytes).
    const total: TrainResult = { lossSum: 0, samples: 0, activeSum: 0, missedLabels: 0 };
    const idsOf: Uint32Array[][][] = [];
    {
      const buf = g1.data.buffer;
      let base = g1.data.byteOffset;
      for (let r = 0; r < size; r++) {
        const end = base + g1.counts[r]!;
        const fail = () => new Error(`rank ${r}'s row-id message is malformed (${g1.counts[r]} bytes)`);
        if (end - base < HEADER_BYTES) throw fail();
        const h = new Float64Array(buf, base, 4);
        total.lossSum += h[0]!;
        total.samples += h[1]!;
        total.activeSum += h[2]!;
        total.missedLabels += h[3]!;
        const nParts = new Uint32Array(buf, base + 32, 1)[0]!;
        let p = base + HEADER_BYTES;
        const rankParts: Uint32Array[][] = [];
        for (let j = 0; j < nParts; j++) {
          const perLayer: Uint32Array[] = [];
          for (let k = 0; k < layers.length; k++) {
            if (!sparse[k]) { perLayer.push(new Uint32Array(0)); continue; }
            if (p + 4 > end) throw fail();
            const cnt = new Uint32Array(buf, p, 1)[0]!;
            if (p + 4 + 4 * cnt > end) throw fail();
            perLayer.push(new Uint32Array(buf, p + 4, cnt));
            p += 4 + 4 * cnt;
          }
          rankParts.push(perLayer);
        }
        idsOf.push(rankParts);
        base = end;
      }
    }

    // 2. Per sparse layer, gather the rows (each rank receives the others' rows) or sum them over the union
    //    of ids with the all-reduce (each rank sends and receives about twice the union): whichever moves
    //    fewer bytes. Every rank decides from the same ids, so all choose alike.
    const union: (Uint32Array | null)[] = layers.map(() => null);
    const reduce = layers.map(() => false);
    layers.forEach((l, k) => {
      if (!sparse[k] || size === 1) return;
      const mark = (this.marks[k] ??= new Int32Array(l.inputMajor ? l.inDim : l.outDim).fill(-1));
      const seen: number[] = [];
      let sum = 0;
      for (const rp of idsOf) for (const pl of rp) {
        const ids = pl[k]!;
        sum += ids.length;
        for (let e = 0; e < ids.length; e++) if (mark[ids[e]!] === -1) { mark[ids[e]!] = 0; seen.push(ids[e]!); }
      }
      const u = Uint32Array.from(seen).sort();
      if (2 * u.length < sum) {
        reduce[k] = true;
        union[k] = u;
        for (let i = 0; i < u.length; i++) mark[u[i]!] = i; // position in the union, until the rows are added
      } else {
        for (const id of seen) mark[id] = -1;
      }
    });

    // 3. Rows of the gathered layers: per part and layer [rows][rowBias (neuron-major)].
    const gatherLayers = layers.map((_, k) => sparse[k] && !reduce[k]);
    let rowBytes = 0;
    for (const r of results) layers.forEach((l, k) => {
      if (gatherLayers[k]) rowBytes += r.grads[k]!.rows.byteLength + (l.inputMajor ? 0 : r.grads[k]!.ids.length * 4);
    });
    const rowMsg = new Uint8Array(rowBytes);
    off = 0;
    const put = (a: Float32Array) => {
      rowMsg.set(new Uint8Array(a.buffer, a.byteOffset, a.byteLength), off);
      off += a.byteLength;
    };
    for (const r of results) layers.forEach((l, k) => {
      if (!gatherLayers[k]) return;
      put(r.grads[k]!.rows);
      if (!l.inputMajor) put(r.grads[k]!.rowBias!);
    });
    const anyGather = gatherLayers.some((x) => x);
    const g2 = !anyGather ? null : size > 1 ? this.comm.allgatherv(rowMsg) : { data: rowMsg, counts: [rowMsg.byteLength] };

    // 4. One all-reduce (Float32): [parts that trained a sample, parts with dense rows], layer 0's bias vector,
    //    every dense layer's rows and biases, then each reduced layer's union rows and their biases. This
    //    rank's parts are summed into it in part order.
    const layout: number[] = [];
    let len = 2 + layers[0]!.outDim;
    layers.forEach((l, k) => {
      layout[k] = len;
      if (dense[k]) len += l.outDim * l.inDim + l.outDim;
      else if (reduce[k]) len += union[k]!.length * (width[k]! + (l.inputMajor ? 0 : 1));
    });
    const red = new Float32Array(len);
    for (const r of results) {
      const b = r.grads[0]!.biasVector;
      if (b) {
        red[0]!++;
        addInto(red, 2, b);
      }
      let anyDense = false;
      layers.forEach((l, k) => {
        const g = r.grads[k]!;
        if (dense[k] && g.ids.length) {
          anyDense = true;
          if (g.ids.length !== l.outDim) throw new Error(`dense layer ${k} returned ${g.ids.length} of ${l.outDim} rows`);
          addInto(red, layout[k]!, g.rows);
          addInto(red, layout[k]! + l.outDim * l.inDim, g.rowBias!);
        } else if (reduce[k]) {
          const w = width[k]!, mark = this.marks[k]!, U = union[k]!.length;
          for (let e = 0; e < g.ids.length; e++) {
            const pos = mark[g.ids[e]!]!;
            const dst = layout[k]! + pos * w;
            const src = g.rows.subarray(e * w, (e + 1) * w);
            for (let i = 0; i < w; i++) red[dst + i]! += src[i]!;
            if (!l.inputMajor) red[layout[k]! + U * w + pos]! += g.rowBias![e]!;
          }
        }
      });
      if (anyDense) red[1]!++;
    }
    layers.forEach((_, k) => { if (reduce[k]) for (const id of union[k]!) this.marks[k]![id] = -1; });
    if (size > 1) this.comm.allreduceSum(red);
    const t2 = performance.now();

    // 5. The same contributions on every rank: gathered rows in rank then part order, then the sums.
    const updates: RowUpdate[] = [];
    if (g2) {
      const buf = g2.data.buffer;
      let base = g2.data.byteOffset;
      for (let r = 0; r < size; r++) {
        let p = base;
        for (const pl of idsOf[r]!) {
          layers.forEach((l, k) => {
            if (!gatherLayers[k]) return;
            const ids = pl[k]!, cnt = ids.length;
            const need = 4 * cnt * (width[k]! + (l.inputMajor ? 0 : 1));
            if (p + need > base + g2.counts[r]!) throw new Error(`rank ${r}'s row message is shorter than its ids say`);
            const rows = new Float32Array(buf, p, cnt * width[k]!);
            p += 4 * cnt * width[k]!;
            let rowBias: Float32Array | null = null;
            if (!l.inputMajor) {
              rowBias = new Float32Array(buf, p, cnt);
              p += 4 * cnt;
            }
            if (cnt > 0) updates.push({ layer: k, ids, rows, rowBias });
          });
        }
        base += g2.counts[r]!;
      }
    }
    layers.forEach((l, k) => {
      if (!reduce[k]) return;
      const U = union[k]!, w = width[k]!, o = layout[k]!;
      updates.push({ layer: k, ids: U, rows: red.subarray(o, o + U.length * w), rowBias: l.inputMajor ? null : red.subarray(o + U.length * w, o + U.length * (w + 1)) });
    });
    if (red[0]! > 0) updates.push({ layer: 0, ids: new Uint32Array(0), rows: new Float32Array(0), biasVector: red.subarray(2, 2 + layers[0]!.outDim) });
    if (red[1]! > 0) {
      layers.forEach((l, k) => {
        if (!dense[k]) return;
        const o = layout[k]!, w = l.outDim * l.inDim;
        updates.push({ layer: k, ids: Uint32Array.from({ length: l.outDim }, (_, j) => j), rows: red.subarray(o, o + w), rowBias: red.subarray(o + w, o + w + l.outDim) });
      });
    }
    native().netApplyRows(this.spec, { lr: t.lr, beta1: t.beta1, beta2: t.beta2, eps: t.eps }, updates);
    const t3 = performance.now();

    this.stats.steps++;
    this.stepsSinceCheck++;
    this.stats.gradSeconds += (t1 - t0) / 1000;
    this.stats.exchangeSeconds += (t2 - t1) / 1000;
    this.stats.applySeconds += (t3 - t2) / 1000;
    // Volume of the step's gradient messages (all ranks' ids and gathered rows, one copy of the summed
    // buffer), and what this rank receives over its link (a ring all-reduce moves about 2 (R - 1) / R of
    // its buffer through each rank).
    const volume = g1.data.byteLength + (g2 ? g2.data.byteLength : 0) + red.byteLength;
    const received = size > 1 ? g1.data.byteLength - idMsg.byteLength + (g2 ? g2.data.byteLength - rowMsg.byteLength : 0) + (2 * (size - 1) / size) * red.byteLength : 0;
    this.volumeSum += volume;
    this.receivedSum += received;
    this.reducedLayersSum += reduce.filter((x) => x).length;
    return total;
  }
}

/**
 * Rank 0's string on every rank. The others may have waited long for it (rank 0's k-fold selection, its look
 * for a checkpoint): they wait at an idle barrier first, asleep, not polling a core that rank 0's threads need
 * on a shared machine; then one allgatherv (the others send nothing) carries the text.
 */
export function agreeOnRoot(comm: Comm, value: string): string {
  comm.idleBarrier();
  const g = comm.allgatherv(comm.rank === 0 ? new TextEncoder().encode(value) : new Uint8Array(0));
  return new TextDecoder().decode(g.data.subarray(0, g.counts[0]!));
}

function addInto(dst: Float32Array, at: number, src: Float32Array): void {
  for (let i = 0; i < src.length; i++) dst[at + i]! += src[i]!;
}

/** A rank of an MPI job, as `train --distributed` sees it. */
export class DistributedRun {
  readonly rank: number;
  readonly size: number;
  readonly library: string;
  private exec: DistributedExecutor | null = null;
  private evalSeconds = 0;

  private constructor(readonly comm: Comm, info: { rank: number; size: number; library: string }) {
    this.rank = info.rank;
    this.size = info.size;
    this.library = info.library;
  }

  /** Initialises MPI (throws how to get the addon when it is missing). */
  static start(): DistributedRun {
    const m = mpi();
    // A rank waiting in a collective gives its core up (sched_yield) instead of spinning on it, unless the user
    // set otherwise: on a machine whose cores other work shares, spinning ranks starve the rank they wait for
    // (2 ranks on 2 shared vCPUs: 4.3x faster, 1,103 -> 4,743 samples/s); on dedicated cores a yield with
    // nothing else to run returns at once. (Open MPI reads it at MPI_Init.)
    process.env['OMPI_MCA_mpi_yield_when_idle'] ??= '1';
    const info = m.init();
    const comm: Comm = {
      rank: info.rank, size: info.size,
      allgatherv: (b) => m.allgatherv(b), allreduceSum: (v) => m.allreduceSum(v), bcast: (v, r) => m.bcast(v, r),
      barrier: () => m.barrier(), idleBarrier: (us) => m.idleBarrier(us), abort: (c) => m.abort(c),
    };
    return new DistributedRun(comm, info);
  }

  get isRoot(): boolean {
    return this.rank === 0;
  }

  /** Rank 0's string on every rank (e.g. the checkpoint file rank 0 picked, the k-fold selection's report). */
  agree(value: string): string {
    return agreeOnRoot(this.comm, value);
  }

  /** fit() options that make it train data-parallel: the executor over a local pool of `workers` threads. */
  fitOptions(net: Network, workers: number, data: SparseDataset, batchSize: number): { executor: Executor } {
    this.exec = new DistributedExecutor(createExecutor(workers), this.comm, net.spec, Math.ceil(data.points / batchSize));
    return { executor: this.exec };
  }

  /**
   * Evaluation split across ranks: rank r predicts points [r n / R, (r + 1) n / R) of `test`, the top-k
   * rows are gathered (rank order = point order) and every rank computes the metrics of the whole set,
   * exactly as one process would (the metrics count hits, so the split does not change a bit).
   */
  async evaluate(net: Network, test: SparseDataset, opts: EvaluateOptions = {}): Promise<Metrics & { outputsScoredPerPoint: number; predictSeconds: number }> {
    await this.verify(net);
    const ks = opts.k ?? [1, 3, 5];
    const kMax = Math.max(...ks);
    const n = test.points;
    const lo = Math.floor((this.rank * n) / this.size), hi = Math.floor(((this.rank + 1) * n) / this.size);
    const rows = Uint32Array.from({ length: hi - lo }, (_, i) => lo + i);
    const t0 = performance.now();
    const pred = await net.predict(subset(test, rows), { ...opts, k: kMax });
    const predictSeconds = (performance.now() - t0) / 1000;
    this.evalSeconds += predictSeconds;
    const g = this.comm.allgatherv(new Uint8Array(pred.labels.buffer, pred.labels.byteOffset, pred.labels.byteLength));
    const topIdx = new Uint32Array(g.data.buffer, g.data.byteOffset, g.data.byteLength / 4);
    const scored = new Float64Array([pred.outputsScoredPerPoint * rows.length]);
    this.comm.allreduceSum(scored);
    const numLabels = net.config.layers.at(-1)!.size;
    const freq = net.labelFreq ?? labelFrequencies(new Uint32Array(0), numLabels);
    const invP = inversePropensity(freq, Math.max(net.trainPoints, 1), opts.propensityA ?? 0.55, opts.propensityB ?? 1.5);
    const m = computeMetrics({ topIdx, kMax, labelOffsets: test.labelOffsets, labelIndices: test.labelIndices, invPropensity: invP, ks });
    return Object.assign(m, { outputsScoredPerPoint: scored[0]! / Math.max(1, n), predictSeconds });
  }

  /** Compares the replicas' state now (collective); repairs from rank 0 on a mismatch. */
  async verify(net: Network): Promise<boolean> {
    if (this.exec) return this.exec.verify();
    const tmp = new DistributedExecutor(createExecutor(0), this.comm, net.spec, 0);
    const ok = await tmp.verify();
    if (!this.exec) this.exec = tmp;
    return ok;
  }

  /**
   * Network.resume on every rank from the checkpoint rank 0 picks in `dir` (rank 0 alone looks for the
   * newest usable file and renames damaged ones; the others then read that file).
   */
  async resume(dir: string, opts: ResumeOptions): Promise<Network> {
    if (this.isRoot) {
      const net = await resume(dir, opts);
      this.agree(resumeInfo(net)!.file);
      return net;
    }
    return resume(this.agree(''), opts);
  }

  /** The fields `train --distributed --json` adds to its summary. */
  summary(net: Network): Record<string, unknown> {
    let weightsBytes = 0;
    for (const l of net.spec.layers) weightsBytes += l.weights.byteLength + l.bias.byteLength;
    const x = this.exec?.report();
    return {
      ranks: this.size,
      mpi: this.library,
      bytesPerStep: x?.bytesPerStep ?? 0,
      exchange: x ? {
        steps: x.steps,
        bytesPerStep: x.bytesPerStep,
        bytesReceivedPerStep: x.bytesReceived,
        reducedLayersPerStep: x.reducedLayers,
        weightsBytes,
        fractionOfWeights: x.bytesPerStep / Math.max(1, weightsBytes),
        gradSeconds: x.gradSeconds, exchangeSeconds: x.exchangeSeconds, applySeconds: x.applySeconds,
      } : null,
      checksum: this.exec?.checks ?? null,
    };
  }

  /** Ends this rank's part of the job (every rank must call it). */
  finish(): void {
    mpi().finalize();
  }

  /** Ends the whole job after an error on this rank, naming the rank. */
  fail(message: string): never {
    process.stderr.write(`sublinear: rank ${this.rank} of ${this.size}: ${message}\n`);
    this.comm.abort(1);
    throw new Error(message);
  }
}

/** Where a command writes (the CLI's io). */
interface Out {
  out: (s: string) => void;
  err: (s: string) => void;
}

/**
 * Runs a command body as one rank of an MPI job: initialises MPI, gives ranks other than 0 a silent io
 * (only rank 0 reports; null: every rank a silent one), and turns an error on any rank into the end of the whole job (MPI_Abort, exit code
 * 1, or 2 for a usage error) with a message naming the rank, so that no rank waits forever for a dead peer.
 * Finalises MPI after a clean finish.
 */
export async function runAsRank<T>(io: Out | null, body: (dist: DistributedRun, io: Out) => Promise<T>): Promise<T> {
  const dist = DistributedRun.start();
  const rankIo: Out = dist.isRoot && io ? io : { out: () => {}, err: () => {} };
  let code: T;
  try {
    code = await body(dist, rankIo);
  } catch (e) {
    const usage = e instanceof UsageError;
    process.stderr.write(`sublinear: rank ${dist.rank} of ${dist.size}: ${(e as Error)?.message ?? String(e)}\n`);
    dist.comm.abort(usage ? 2 : 1);
    throw e; // not reached
  }
  dist.finish();
  return code;
}

/** Cores for one rank's workers: the machine's cores divided among the ranks on this node (Open MPI, MPICH, Slurm). */
export function coresPerRank(cores: number): number {
  const env = process.env;
  const local = Number(env.OMPI_COMM_WORLD_LOCAL_SIZE ?? env.MPI_LOCALNRANKS ?? env.SLURM_NTASKS_PER_NODE ?? 1);
  return Math.max(1, Math.floor(cores / (Number.isFinite(local) && local >= 1 ? local : 1)));
}
