// Learning while serving (docs/serving.md "Learning online"): labelled examples update a trained network in
// place, visible to the next prediction, while other threads go on predicting with it. One writer: an
// OnlineLearner's learn() calls must not overlap (the server queues them), and nothing else may train the
// network meanwhile.
//
// What changes is what the issue of new labels and new examples touches, and nothing below it: the output
// rows (weights and bias) of the labels involved, and the wide part. The hidden layers stay as trained, so
// a prediction never sees a half-moved representation, only rows being rewritten (a reader may see a row
// part old, part new for the microseconds of its update: the HOGWILD races of training, on a few rows).
//   - Labels not seen before (ids past the network's last, or new names) are added as `train --init` adds
//     them (Network.grow): the network is copied with more output rows, and `network` is the copy from then
//     on (in-flight predictions finish on the old one). Sampled prediction scores every added label for
//     every query (they join the cluster index's head) until the index is rebuilt from the weights.
//   - A learned label (one added here, or any label without pairs in the wide part) gets wide pairs from its
//     remembered examples, chosen and initialised as training chooses them (the features carrying most of
//     its examples' mass, `init` x their unit centroid: WideConfig), rebuilt as its examples arrive; and an
//     output row imprinted from its examples (the unit mean of their last hidden layer, at the median norm of
//     the trained rows), so that it ranks among the trained labels from its first example.
//   - Then every example (and a few remembered examples of the same labels, `replay`) takes `passes` steps
//     of the softmax loss on the rows of its own labels and of the network's current top `negatives`
//     candidates for it (sampled softmax over those), with a per-row Adagrad rate: the rows of its labels
//     move towards its hidden representation, its strongest wrong candidates away from it.
// The re-ranker's classifiers and the probability calibration stay as trained: an added label has no
// classifier (the re-ranker scores it by the intercept of a label without training points, as training
// does) and takes the pooled calibration.
import { sharedFloat32, sharedUint32, toShared, type SparseDataset } from '../datasets/csr.js';
import type { Network } from './network.js';
import type { Executor } from './executor.js';
import type { WideState } from '../native/network-types.js';
import { allocateWide } from './wide.js';
import { transformInput } from './input-scale.js';
import { mapFeatures } from './input-map.js';
import { hiddenForward } from './explain.js';
import { Xoshiro128 } from '../util/rng.js';

/** Options of an OnlineLearner. */
export interface OnlineOptions {
  /** Adagrad rate of the output rows' network part (weights and bias). Default 0.1. */
  lr?: number;
  /** Adagrad rate of the wide part's weights. Default: the wide part's own rate (WideConfig.lr). */
  wideLr?: number;
  /**
   * The step of a label the network trained (one it had before learning, other than those this learner
   * gave wide pairs to) as a fraction of a learned label's: their rows hold what the training data taught,
   * and moving them for a few examples costs the points that data describes (debian-deps, 5,476 examples
   * of held-out labels: P@1 on the other test points 0.778 before, 0.740 after at a full step, 0.779 at 0).
   * Default 0.05.
   */
  trainedRate?: number;
  /** Steps each example takes (over the request's examples and the replayed ones). Default 3. */
  passes?: number;
  /** The network's top candidates per example whose rows the step pushes away from it (besides its own labels). Default 32. */
  negatives?: number;
  /** Examples remembered (for replay, and for the wide pairs and imprint of learned labels), the oldest dropped first. Default 20,000. */
  memory?: number;
  /** Remembered examples of a request's labels replayed with it, per example of the request. Default 2. */
  replay?: number;
  /** Labels one learn() call may add. Default 100,000. */
  maxNewLabels?: number;
  /**
   * The steps hand the thread back (await setImmediate) after this many milliseconds, so that a server's
   * requests are not held up for a whole call. Default 2.
   */
  sliceMs?: number;
  /**
   * The share of the thread's time the steps take at most: after each slice they wait (1 - share) / share
   * times as long, which leaves the cores to the predictions. 1: no waits. Default 0.5.
   */
  share?: number;
}

/** What one learn() call did. */
export interface LearnReport {
  examples: number;
  /** Labels added (the network grew by this many outputs). */
  newLabels: number;
  /** The network's labels now. */
  labels: number;
  /** Examples replayed with this call's. */
  replayed: number;
  /** Output rows updated (each counted once). */
  rows: number;
  seconds: number;
}

/** A remembered example: its input as the kernels see it, its last hidden layer, its labels. */
interface Memory {
  features: Uint32Array;
  x: Float32Array;
  h: Float32Array;
  labels: Uint32Array;
}

/**
 * Applies labelled examples to a trained network, one call at a time (see the file comment).
 *
 * @example
 * ```ts
 * const learner = new OnlineLearner(await Network.load('m.sl'));
 * await learner.learn(examples); // SparseDataset with labels; ids past the last label add labels
 * await learner.network.predict(points);
 * ```
 */
export class OnlineLearner {
  private net: Network;
  private readonly o: Required<Omit<OnlineOptions, 'wideLr'>> & { wideLr: number };
  private readonly memory: Memory[] = [];
  /** Per output row: Adagrad's sum of squared gradient scales. */
  private accum: Float32Array;
  /** Labels this learner added or gave wide pairs to: their pairs are rebuilt from their remembered examples. */
  private readonly learned = new Set<number>();
  /** Labels with pairs in the wide part (trained ones keep theirs). */
  private hasPairs: Uint8Array;
  private rowNorm = 1;
  private rowBias = 0;
  /** The sum and count of the hidden layers of every example learned: their mean centres an imprint. */
  private hSum: Float64Array | null = null;
  private hCount = 0;
  private busy = false;
  private readonly rng = new Xoshiro128(0x1ea4);
  /** Examples learned over the learner's life. */
  examplesLearned = 0;

  constructor(net: Network, opts: OnlineOptions = {}) {
    const int = (v: number | undefined, d: number, name: string, min = 0) => {
      const x = v ?? d;
      if (!Number.isInteger(x) || x < min) throw new Error(`Expected integer >= ${min} for ${name} but received ${JSON.stringify(v)}`);
      return x;
    };
    const pos = (v: number | undefined, d: number, name: string) => {
      const x = v ?? d;
      if (!(typeof x === 'number' && x > 0 && Number.isFinite(x))) throw new Error(`Expected positive number for ${name} but received ${JSON.stringify(v)}`);
      return x;
    };
    if (net.config.layers.length < 2) throw new Error('Online learning needs a hidden layer below the output layer');
    this.o = {
      lr: pos(opts.lr, 0.1, 'lr'), trainedRate: opts.trainedRate === 0 ? 0 : pos(opts.trainedRate, 0.05, 'trainedRate'), wideLr: pos(opts.wideLr, net.config.layers.at(-1)!.wide?.lr ?? 0.2, 'wideLr'),
      passes: int(opts.passes, 3, 'passes', 1), negatives: int(opts.negatives, 32, 'negatives'), memory: int(opts.memory, 20_000, 'memory'),
      replay: int(opts.replay, 2, 'replay'), maxNewLabels: int(opts.maxNewLabels, 100_000, 'maxNewLabels', 1), sliceMs: pos(opts.sliceMs, 2, 'sliceMs'), share: Math.min(1, pos(opts.share, 0.5, 'share')),
    };
    this.net = net;
    const out = net.spec.layers.at(-1)!;
    this.accum = new Float32Array(out.outDim).fill(1);
    this.hasPairs = new Uint8Array(out.outDim);
    if (out.wide) for (const l of out.wide.labels) this.hasPairs[l] = 1;
    // The imprint of a learned label: the median norm and bias of the trained rows (of labels seen in training).
    const norms: number[] = [], biases: number[] = [];
    const step = Math.max(1, Math.floor(out.outDim / 2000));
    for (let j = 0; j < out.outDim; j += step) {
      if (net.labelFreq && net.labelFreq[j] === 0) continue;
      let s = 0;
      for (let i = 0; i < out.inDim; i++) s += out.weights[j * out.inDim + i]! ** 2;
      norms.push(Math.sqrt(s));
      biases.push(out.bias[j]!);
    }
    this.rowNorm = median(norms) || 1;
    this.rowBias = median(biases);
  }

  /** The network to predict with: the learner's (a new object after labels were added). */
  get network(): Network {
    return this.net;
  }

  /**
   * Learns `examples` (CSR rows with labels; a label id at or past the network's label count adds labels up
   * to it). `labelNames`: the names of all labels after the call, when the network has names. `executor`
   * runs the candidate predictions (default: this thread). Calls must not overlap.
   */
  async learn(examples: SparseDataset, opts: { labelNames?: readonly string[]; executor?: Executor } = {}): Promise<LearnReport> {
    if (this.busy) throw new Error('OnlineLearner.learn: a call is already running (one writer at a time)');
    this.busy = true;
    try {
      return await this.learnNow(examples, opts);
    } finally {
      this.busy = false;
    }
  }

  private async learnNow(examples: SparseDataset, opts: { labelNames?: readonly string[]; executor?: Executor }): Promise<LearnReport> {
    const t0 = performance.now();
    const inputDim = this.net.inputFeatures;
    if (examples.features > inputDim) throw new Error(`The examples have ${examples.features} features but the network's inputDim is ${inputDim}`);
    // A mapped network learns on its rows: a feature the training data never held is ignored (it has no
    // row to learn; src/network/input-map.ts). Everything below (memories, replays) is in rows.
    if (this.net.inputMap) examples = mapFeatures(examples, this.net.inputMap);
    let maxLabel = -1;
    for (let e = examples.labelOffsets[0]!; e < examples.labelOffsets[examples.points]!; e++) maxLabel = Math.max(maxLabel, examples.labelIndices[e]!);
    const before = this.net.config.layers.at(-1)!.size;
    const added = Math.max(0, maxLabel + 1 - before);
    if (added > this.o.maxNewLabels) throw new Error(`The examples add ${added} labels (ids up to ${maxLabel}); one call may add at most ${this.o.maxNewLabels}`);
    if (added > 0) this.grow(maxLabel + 1, opts.labelNames);
    else if (opts.labelNames) this.net.labelNames = opts.labelNames;
    const net = this.net;
    const out = net.spec.layers.at(-1)!;
    // The examples as the kernels see them, their hidden layer, remembered.
    const batch: Memory[] = [];
    for (let i = 0; i < examples.points; i++) {
      const lo = examples.offsets[i]!, hi = examples.offsets[i + 1]!;
      const features = examples.indices.slice(lo, hi);
      const x = new Float32Array(hi - lo);
      for (let q = 0; q < x.length; q++) x[q] = transformInput(examples.values[lo + q]!, features[q]!, net.inputScale, net.inputLog);
      const { h } = hiddenForward(net.spec, features, x);
      const labels = examples.labelIndices.slice(examples.labelOffsets[i]!, examples.labelOffsets[i + 1]!);
      batch.push({ features, x, h: Float32Array.from(h.at(-1)!), labels });
    }
    const replayed = this.replayFor(batch);
    for (const m of batch) this.remember(m);
    // Candidates: the network's current top ones for each example (sampled for a sampled output layer).
    const all = [...batch, ...replayed];
    const candidates = await this.candidates(all, opts.executor);
    // Labels without trained pairs: pairs and imprint from every remembered example of theirs.
    const involved = new Set<number>();
    for (const m of batch) for (const l of m.labels) involved.add(l);
    const fresh = [...involved].filter((l) => l >= before || !this.hasPairs[l] || this.learned.has(l)).sort((a, b) => a - b);
    if (fresh.length > 0) this.relearn(fresh, before);
    // In-batch negatives: every example's step also pushes away the request's other labels (at most 64).
    const shared = [...involved].slice(0, 64);
    const touched = new Set<number>();
    // The steps run on the calling thread: it is handed back every `sliceMs`, so that work arriving
    // meanwhile on its event loop waits for a slice, not for the whole call (a server runs its learner on
    // a thread of its own with share 1: src/serve/learner-thread.ts).
    let since = performance.now();
    for (let pass = 0; pass < this.o.passes; pass++) {
      for (let i = 0; i < all.length; i++) {
        this.step(all[i]!, candidates[i]!, shared, touched);
        const ran = performance.now() - since;
        if (ran >= this.o.sliceMs) {
          // At most `share` of the thread's time: the rest is the readers'.
          const rest = (ran * (1 - this.o.share)) / this.o.share;
          await new Promise((r) => (rest >= 1 ? setTimeout(r, rest) : setImmediate(r)));
          since = performance.now();
        }
      }
    }
    for (const m of batch) {
      for (const l of m.labels) if (net.labelFreq && l < net.labelFreq.length) net.labelFreq[l]!++;
    }
    net.trainPoints += examples.points;
    this.examplesLearned += examples.points;
    return { examples: examples.points, newLabels: added, labels: out.outDim, replayed: replayed.length, rows: touched.size, seconds: (performance.now() - t0) / 1000 };
  }

  /** Adds outputs up to `labels` (Network.grow, inference-sized), keeping the cluster index with the new labels in its head. */
  private grow(labels: number, names: readonly string[] | undefined): void {
    const old = this.net;
    const before = old.config.layers.at(-1)!.size;
    const grown = old.grow(labels, names, { shareHidden: true });
    const out = grown.spec.layers.at(-1)!;
    // A label with no example yet (ids skipped over) is never predicted: its bias far below the trained
    // ones (an imprint sets it when its examples come).
    let low = 0;
    for (let j = 0; j < before; j++) low = Math.min(low, out.bias[j]!);
    for (let j = before; j < labels; j++) out.bias[j] = low - 20;
    grown.adoptClusterIndex(old, Array.from({ length: labels - before }, (_, i) => before + i));
    const accum = new Float32Array(labels).fill(1);
    accum.set(this.accum);
    this.accum = accum;
    const pairs = new Uint8Array(labels);
    pairs.set(this.hasPairs);
    this.hasPairs = pairs;
    this.net = grown;
  }

  /** Remembered examples (newest first) that share a label with the batch, `replay` per batch example. */
  private replayFor(batch: Memory[]): Memory[] {
    const want = this.o.replay * batch.length;
    if (want === 0) return [];
    const labels = new Set<number>();
    for (const m of batch) for (const l of m.labels) labels.add(l);
    const out: Memory[] = [];
    const taken = new Set<number>();
    for (let i = this.memory.length - 1; i >= 0 && out.length < want; i--) {
      const m = this.memory[i]!;
      if (m.labels.some((l) => labels.has(l))) {
        out.push(m);
        taken.add(i);
      }
    }
    // And as many other remembered examples, at random: negatives for the request's labels.
    for (let t = 0; t < batch.length && taken.size < this.memory.length; t++) {
      const i = this.rng.below(this.memory.length);
      if (taken.has(i)) continue;
      taken.add(i);
      out.push(this.memory[i]!);
    }
    return out;
  }

  private remember(m: Memory): void {
    if (!this.hSum) this.hSum = new Float64Array(m.h.length);
    for (let i = 0; i < m.h.length; i++) this.hSum[i] += m.h[i]!;
    this.hCount++;
    if (this.o.memory === 0) return;
    this.memory.push(m);
    if (this.memory.length > this.o.memory) this.memory.splice(0, this.memory.length - this.o.memory);
  }

  /**
   * Labels `labels` (ascending) from their remembered examples: wide pairs chosen as training chooses them
   * (WideConfig), and, for labels the network never trained (ids >= `trainedLabels`, or never seen in
   * training), the imprinted output row.
   */
  private relearn(labels: number[], trainedLabels: number): void {
    const net = this.net;
    const out = net.spec.layers.at(-1)!;
    const H = out.inDim;
    const examplesOf = new Map<number, Memory[]>(labels.map((l) => [l, []]));
    for (const m of this.memory) for (const l of m.labels) examplesOf.get(l)?.push(m);
    for (const l of labels) {
      this.learned.add(l);
      const never = l >= trainedLabels || (net.labelFreq !== null && net.labelFreq[l] === 0);
      if (!never) continue;
      // The row: the mean of the examples' hidden layers less the mean of every example learned (ReLU
      // outputs are all positive: an uncentred mean scores every point alike), at the trained rows' median
      // norm; the bias puts its examples' logits at the median trained bias (then the steps move it).
      const own = examplesOf.get(l)!;
      const mean = new Float64Array(H);
      for (const m of own) for (let i = 0; i < H; i++) mean[i] += m.h[i]! / own.length;
      if (this.hSum && this.hCount > own.length) for (let i = 0; i < H; i++) mean[i] -= this.hSum[i]! / this.hCount;
      let n2 = 0;
      for (let i = 0; i < H; i++) n2 += mean[i]! * mean[i]!;
      const scale = n2 > 0 ? this.rowNorm / Math.sqrt(n2) : 0;
      for (let i = 0; i < H; i++) out.weights[l * H + i] = mean[i]! * scale;
      let dot = 0;
      for (const m of own) for (let i = 0; i < H; i++) dot += (out.weights[l * H + i]! * m.h[i]!) / own.length;
      out.bias[l] = this.rowBias - dot;
    }
    const cfg = net.config.layers.at(-1)!.wide;
    if (!cfg || !out.wide) return;
    // The pairs of each label: its examples' summed |x| per feature, the largest maxPerLabel of those holding
    // at least minShare of the sums' norm (the strongest always), weighted init x the unit sums.
    const pairs = new Map<number, { f: number; w: number }[]>();
    for (const l of labels) {
      const sum = new Map<number, number>();
      for (const m of examplesOf.get(l)!) for (let q = 0; q < m.features.length; q++) sum.set(m.features[q]!, (sum.get(m.features[q]!) ?? 0) + Math.abs(m.x[q]!));
      let norm = 0;
      for (const v of sum.values()) norm += v * v;
      norm = Math.sqrt(norm);
      const kept = [...sum].sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, cfg.maxPerLabel)
        .filter(([, v], r) => r === 0 || v >= cfg.minShare * norm);
      pairs.set(l, kept.map(([f, v]) => ({ f, w: norm > 0 ? (cfg.init * v) / norm : 0 })));
      this.hasPairs[l] = kept.length > 0 ? 1 : 0;
    }
    out.wide = replacePairs(out.wide, pairs);
  }

  /** The network's top `negatives` labels for each example (as prediction ranks them, without the re-ranker). */
  private async candidates(items: Memory[], executor: Executor | undefined): Promise<Uint32Array[]> {
    const K = Math.min(this.o.negatives, this.net.config.layers.at(-1)!.size);
    if (K === 0 || items.length === 0) return items.map(() => new Uint32Array(0));
    const offsets = sharedUint32(items.length + 1);
    let nnz = 0;
    items.forEach((m, i) => (offsets[i + 1] = nnz += m.features.length));
    const indices = sharedUint32(nnz), values = sharedFloat32(nnz);
    items.forEach((m, i) => {
      indices.set(m.features, offsets[i]!);
      values.set(m.x, offsets[i]!); // as the kernels see them (predictCandidates applies no input transform)
    });
    const data = toShared({
      points: items.length, features: this.net.config.inputDim, labels: 0, offsets, indices, values,
      labelOffsets: sharedUint32(items.length + 1), labelIndices: sharedUint32(0),
    });
    const mode = this.net.spec.layers.at(-1)!.sampling ? 'sampled' : 'exact';
    // A few points per call, one call at a time: the prediction threads are the server's, and a request
    // queued behind this should wait for a short call, not for the whole request's candidates.
    const out: Uint32Array[] = [];
    for (let s = 0; s < items.length; s += 8) {
      const rows = Uint32Array.from({ length: Math.min(8, items.length - s) }, (_, i) => s + i);
      const p = await this.net.predictCandidates(subsetRows(data, rows), K, mode, executor);
      for (let i = 0; i < rows.length; i++) out.push(p.subarray(i * K, (i + 1) * K));
    }
    return out;
  }

  /**
   * One softmax step of example m over its labels, its candidates and the request's labels (`shared`): a
   * sampled softmax. Per-row Adagrad (the sums start at 1, so a small gradient takes a small step), in
   * units of the trained rows' median norm along m's unit hidden vector.
   */
  private step(m: Memory, candidates: Uint32Array, shared: readonly number[], touched: Set<number>): void {
    const out = this.net.spec.layers.at(-1)!;
    const H = out.inDim;
    const set = new Set<number>(m.labels);
    for (const c of candidates) if (c !== 0xffffffff) set.add(c);
    for (const c of shared) set.add(c);
    const ids = [...set];
    const z = ids.map((j) => this.logit(j, m));
    let mx = -Infinity;
    for (const v of z) mx = Math.max(mx, v);
    let sum = 0;
    const p = z.map((v) => {
      const e = Math.exp(v - mx);
      sum += e;
      return e;
    });
    const target = 1 / m.labels.length;
    let hh = 0;
    for (let i = 0; i < H; i++) hh += m.h[i]! * m.h[i]!;
    const unit = hh > 0 ? 1 / Math.sqrt(hh) : 0;
    ids.forEach((j, t) => {
      const g = p[t]! / sum - (m.labels.includes(j) ? target : 0);
      if (Math.abs(g) < 1e-6) return;
      const scale = this.learned.has(j) ? 1 : this.o.trainedRate;
      if (scale === 0) return;
      touched.add(j);
      this.accum[j] += g * g;
      const rate = (scale * this.o.lr * g) / Math.sqrt(this.accum[j]!);
      const a = rate * this.rowNorm * unit;
      for (let i = 0; i < H; i++) out.weights[j * H + i]! -= a * m.h[i]!;
      out.bias[j]! -= rate;
      const w = out.wide;
      if (!w) return;
      const wr = (scale * this.o.wideLr * g) / Math.sqrt(this.accum[j]!);
      for (let q = 0; q < m.features.length; q++) {
        const e = findLabel(w, m.features[q]!, j);
        if (e >= 0) w.weights[e]! -= wr * m.x[q]!;
      }
    });
  }

  /** Label j's logit for example m: its output row over m's hidden layer, plus its wide part. */
  private logit(j: number, m: Memory): number {
    const out = this.net.spec.layers.at(-1)!;
    const H = out.inDim;
    let s = out.bias[j]!;
    for (let i = 0; i < H; i++) s += out.weights[j * H + i]! * m.h[i]!;
    const w = out.wide;
    if (w) {
      for (let q = 0; q < m.features.length; q++) {
        const e = findLabel(w, m.features[q]!, j);
        if (e >= 0) s += w.weights[e]! * m.x[q]!;
      }
    }
    return s;
  }
}

/** A wide part in which the labels of `pairs` have exactly those pairs (their old ones dropped); the others keep theirs. */
function replacePairs(w: WideState, pairs: Map<number, { f: number; w: number }[]>): WideState {
  const byFeature = new Map<number, { l: number; w: number }[]>();
  for (const [l, list] of pairs) {
    for (const p of list) {
      const a = byFeature.get(p.f);
      if (a) a.push({ l, w: p.w });
      else byFeature.set(p.f, [{ l, w: p.w }]);
    }
  }
  let nnz = 0;
  for (let e = 0; e < w.labels.length; e++) if (!pairs.has(w.labels[e]!)) nnz++;
  for (const a of byFeature.values()) nnz += a.length;
  const withAccum = w.accum.length > 0;
  const out = allocateWide(w.inputDim, nnz, !withAccum);
  let p = 0;
  for (let f = 0; f < w.inputDim; f++) {
    const add = byFeature.get(f)?.sort((a, b) => a.l - b.l) ?? [];
    let t = 0;
    for (let e = w.offsets[f]!; e < w.offsets[f + 1]!; e++) {
      const l = w.labels[e]!;
      if (pairs.has(l)) continue;
      for (; t < add.length && add[t]!.l < l; t++, p++) {
        out.labels[p] = add[t]!.l;
        out.weights[p] = add[t]!.w;
      }
      out.labels[p] = l;
      out.weights[p] = w.weights[e]!;
      if (withAccum) out.accum[p] = w.accum[e]!;
      p++;
    }
    for (; t < add.length; t++, p++) {
      out.labels[p] = add[t]!.l;
      out.weights[p] = add[t]!.w;
    }
    out.offsets[f + 1] = p;
  }
  return out;
}

/** The entry of (feature f, label j) in the wide part, or -1. */
function findLabel(w: WideState, f: number, j: number): number {
  let lo = w.offsets[f]!, hi = w.offsets[f + 1]!;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const v = w.labels[mid]!;
    if (v === j) return mid;
    if (v < j) lo = mid + 1;
    else hi = mid;
  }
  return -1;
}

/** Rows `rows` of `d` (no labels) on SharedArrayBuffers. */
function subsetRows(d: SparseDataset, rows: Uint32Array): SparseDataset {
  let nnz = 0;
  for (const r of rows) nnz += d.offsets[r + 1]! - d.offsets[r]!;
  const offsets = sharedUint32(rows.length + 1), indices = sharedUint32(nnz), values = sharedFloat32(nnz);
  let p = 0;
  rows.forEach((r, i) => {
    indices.set(d.indices.subarray(d.offsets[r]!, d.offsets[r + 1]!), p);
    values.set(d.values.subarray(d.offsets[r]!, d.offsets[r + 1]!), p);
    p += d.offsets[r + 1]! - d.offsets[r]!;
    offsets[i + 1] = p;
  });
  return { points: rows.length, features: d.features, labels: 0, offsets, indices, values, labelOffsets: sharedUint32(rows.length + 1), labelIndices: sharedUint32(0) };
}

function median(a: number[]): number {
  if (a.length === 0) return 0;
  const s = a.slice().sort((x, y) => x - y);
  return s[s.length >> 1]!;
}
