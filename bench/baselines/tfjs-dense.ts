// Dense TensorFlow.js baseline: the network sublinear trains, written the way a tfjs user would write it.
//
//   sparse input --(W1, b1, ReLU)--> hidden ... --(Wout, bout)--> full softmax over all labels
//
// tfjs has no sparse matmul and no SparseTensor, so the first layer is a `tf.customGrad` op: forward
// `sparseSegmentSum(gather(W1, idx) * values, range(nnz), segmentIds)`, backward a dense-shaped (D x H)
// gradient built with `scatterND` (which sums duplicate rows). `unsortedSegmentSum`, what tf.gather's
// own gradient uses, is not registered on the wasm backend. The loss is tfjs's
// `tf.losses.softmaxCrossEntropy` against a dense (batch x labels) target holding 1/|labels| at each
// true label; the optimiser is `tf.train.adam` (dense: every parameter's moments are updated each step).
//
// The default backend is @tensorflow/tfjs-backend-wasm (SIMD); in Node it runs on ONE thread (tfjs
// disables wasm multi-threading under Node). Its heap is capped at 4 GiB (wasm32), which bounds the
// label count it can train. `backend: 'cpu'` (pure JS) is available for comparison.

import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';
import type { SparseDataset } from '../../src/datasets/csr.js';
import { Xoshiro128 } from '../../src/util/rng.js';
import {
  type BaselineOptions, type BaselineResult, type EvalRecord, type GatheredBatch,
  countTop1Hits, epochOrder, evalBatchRows, evalSubset, gatherBatch, glorotUniform, labelledRows,
  resolveOptions, SteadyRate,
} from './common.js';
import { peakRssBytes } from '../../src/util/peak-rss.js';

export type TfjsBackend = 'wasm' | 'cpu';

export interface TfjsOptions extends BaselineOptions {
  /** tfjs backend (default 'wasm'). */
  backend?: TfjsBackend;
}

/** Selects and initialises a tfjs backend (global to the process). */
export async function initTfjs(backend: TfjsBackend = 'wasm'): Promise<void> {
  if (tf.getBackend() !== backend) {
    const ok = await tf.setBackend(backend);
    if (!ok) throw new Error(`tfjs: backend '${backend}' failed to initialise`);
  }
  await tf.ready();
}

/** The trainable parameters: weights[0] is (features x hidden[0]); weights[k] is (in x out); biases zero. */
export interface TfjsModel {
  weights: tf.Variable[];
  biases: tf.Variable[];
}

export function createModel(features: number, hidden: number[], labels: number, seed: number): TfjsModel {
  const dims = [features, ...hidden, labels];
  const rng = new Xoshiro128(seed);
  const weights: tf.Variable[] = [], biases: tf.Variable[] = [];
  for (let k = 0; k + 1 < dims.length; k++) {
    const fanIn = dims[k]!, fanOut = dims[k + 1]!;
    const w = glorotUniform(new Float32Array(fanIn * fanOut), fanIn, fanOut, rng);
    const w0 = tf.tensor2d(w, [fanIn, fanOut]), b0 = tf.zeros([fanOut]);
    weights.push(tf.variable(w0, true, `W${k}`));
    biases.push(tf.variable(b0, true, `b${k}`));
    w0.dispose(); b0.dispose(); // the variables hold their own references to the data
  }
  return { weights, biases };
}

export function disposeModel(m: TfjsModel): void {
  for (const v of [...m.weights, ...m.biases]) v.dispose();
}

/** Batch tensors of a gathered CSR slice. The segment ids always end at size-1 (a zero-valued sentinel
 * entry is appended when the last rows are empty) so sparseSegmentSum yields exactly `size` rows. */
export interface SparseBatchTensors {
  size: number;
  idx: tf.Tensor1D;   // int32 (n)
  vals: tf.Tensor1D;  // float32 (n)
  seg: tf.Tensor1D;   // int32 (n)
  pos: tf.Tensor1D;   // int32 (n): 0..n-1, the `indices` argument of sparseSegmentSum
}

export function sparseBatchTensors(b: Pick<GatheredBatch, 'size' | 'idx' | 'vals' | 'seg'>): SparseBatchTensors {
  let { idx, vals, seg } = b;
  const n0 = idx.length;
  if (n0 === 0 || seg[n0 - 1]! !== b.size - 1) {
    const i2 = new Int32Array(n0 + 1), v2 = new Float32Array(n0 + 1), s2 = new Int32Array(n0 + 1);
    i2.set(idx); v2.set(vals); s2.set(seg);
    i2[n0] = 0; v2[n0] = 0; s2[n0] = b.size - 1;
    idx = i2; vals = v2; seg = s2;
  }
  const n = idx.length;
  return {
    size: b.size,
    idx: tf.tensor1d(idx, 'int32'),
    vals: tf.tensor1d(vals, 'float32'),
    seg: tf.tensor1d(seg, 'int32'),
    pos: tf.range(0, n, 1, 'int32') as tf.Tensor1D,
  };
}

export function disposeBatch(t: SparseBatchTensors): void {
  t.idx.dispose(); t.vals.dispose(); t.seg.dispose(); t.pos.dispose();
}

function sparseForward(w: tf.Tensor, t: SparseBatchTensors): tf.Tensor2D {
  const rows = tf.gather(w, t.idx);                       // (n, H)
  const scaled = tf.mul(rows, tf.expandDims(t.vals, 1));  // (n, H)
  return tf.sparse.sparseSegmentSum(scaled, t.pos, t.seg) as tf.Tensor2D; // (size, H)
}

/**
 * x_sparse @ W as a differentiable op: the forward pass touches only the batch's feature rows; the
 * gradient is dense-shaped (features x H), built with scatterND (duplicate feature ids are summed).
 */
export function sparseMatMul(w: tf.Tensor2D, t: SparseBatchTensors): tf.Tensor2D {
  const op = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const wIn = args[0] as tf.Tensor;
    const value = sparseForward(wIn, t);
    const gradFunc = (dy: tf.Tensor) => {
      const perEntry = tf.mul(tf.gather(dy, t.seg), tf.expandDims(t.vals, 1)); // (n, H)
      return tf.scatterND(tf.expandDims(t.idx, 1), perEntry, wIn.shape) as tf.Tensor;
    };
    return { value, gradFunc };
  });
  return op(w) as tf.Tensor2D;
}

/** Logits (size x labels). `train` selects the customGrad first layer (needed only for gradients). */
export function forwardLogits(m: TfjsModel, t: SparseBatchTensors, train: boolean): tf.Tensor2D {
  let h: tf.Tensor = train ? sparseMatMul(m.weights[0] as tf.Tensor2D, t) : sparseForward(m.weights[0]!, t);
  h = tf.relu(tf.add(h, m.biases[0]!));
  const last = m.weights.length - 1;
  for (let k = 1; k <= last; k++) {
    h = tf.add(tf.matMul(h, m.weights[k] as tf.Tensor2D), m.biases[k]!);
    if (k < last) h = tf.relu(h);
  }
  return h as tf.Tensor2D;
}

/** Mean softmax cross-entropy of a batch against targets y_j = 1/|labels| (the training loss). */
export function batchLoss(m: TfjsModel, t: SparseBatchTensors, g: GatheredBatch, labels: number): tf.Scalar {
  const logits = forwardLogits(m, t, true);
  const pairs = tf.stack([tf.tensor1d(g.labelRows, 'int32'), tf.tensor1d(g.labelCols, 'int32')], 1);
  const y = tf.scatterND(pairs, tf.tensor1d(g.labelWeights, 'float32'), [g.size, labels]);
  return tf.losses.softmaxCrossEntropy(y, logits) as tf.Scalar;
}

/** Top-1 predicted label of each row. */
export function predictTop1(m: TfjsModel, ds: SparseDataset, rows: Uint32Array): Int32Array {
  const out = new Int32Array(rows.length);
  const step = evalBatchRows(m.weights[m.weights.length - 1]!.shape[1]!);
  for (let s = 0; s < rows.length; s += step) {
    const sub = rows.subarray(s, Math.min(rows.length, s + step));
    const g = gatherBatch(ds, sub);
    const t = sparseBatchTensors(g);
    const am = tf.tidy(() => tf.argMax(forwardLogits(m, t, false), 1));
    out.set(am.dataSync() as Int32Array, s);
    am.dispose();
    disposeBatch(t);
  }
  return out;
}

function precisionAt1(m: TfjsModel, ds: SparseDataset, rows: Uint32Array): number {
  if (rows.length === 0) return NaN;
  return countTop1Hits(ds, rows, predictTop1(m, ds, rows)) / rows.length;
}

/** Trains the dense tfjs baseline; see BaselineOptions. Training time excludes evaluation. */
export async function trainTfjs(opts: TfjsOptions): Promise<BaselineResult> {
  const o = resolveOptions(opts);
  const backend = opts.backend ?? 'wasm';
  await initTfjs(backend);
  const { train, test } = opts;
  const L = train.labels;
  const model = createModel(train.features, o.hidden, L, o.seed);
  const optimizer = tf.train.adam(o.lr, o.beta1, o.beta2, o.eps);
  const vars = [...model.weights, ...model.biases];
  const rng = new Xoshiro128(o.seed + 1);
  const trainRows = labelledRows(train);
  const evalRows = test ? evalSubset(test.points, o.evalPoints, o.seed) : new Uint32Array(0);
  const finalRows = test ? evalSubset(test.points, o.finalEvalPoints, o.seed + 7) : new Uint32Array(0);

  let seconds = 0, evalSeconds = 0, samples = 0, batches = 0, diverged = false;
  let lossSinceEval = 0, batchesSinceEval = 0, lastEvalBatch = -1, lastEvalSeconds = 0;
  const recentLoss: number[] = [];
  const curve: BaselineResult['curve'] = [];
  const steady = new SteadyRate(o.warmupBatches);
  const batchSeconds: number[] = [];

  const evaluate = () => {
    if (!test || evalRows.length === 0) return;
    const t0 = performance.now();
    const p1 = precisionAt1(model, test, evalRows);
    evalSeconds += (performance.now() - t0) / 1000;
    const rec: EvalRecord = { seconds, samples, batches, p1, loss: batchesSinceEval ? lossSinceEval / batchesSinceEval : NaN };
    curve.push({ seconds, samples, p1 });
    lossSinceEval = 0; batchesSinceEval = 0; lastEvalBatch = batches; lastEvalSeconds = seconds;
    opts.onEval?.(rec);
  };

  try {
    if (o.evalAtStart) evaluate();
    const done = () => batches >= o.maxBatches || seconds >= o.maxSeconds || diverged;
    for (let epoch = 0; epoch < o.epochs && !done() && trainRows.length > 0; epoch++) {
      const order = epochOrder(trainRows, rng);
      for (let s = 0; s < order.length && !done(); s += o.batchSize) {
        const t0 = performance.now();
        const rows = order.subarray(s, Math.min(order.length, s + o.batchSize));
        const g = gatherBatch(train, rows);
        const t = sparseBatchTensors(g);
        const lossT = tf.tidy(() => optimizer.minimize(() => batchLoss(model, t, g, L), true, vars)!);
        const loss = (lossT.dataSync() as Float32Array)[0]!;
        lossT.dispose();
        disposeBatch(t);
        const dt = (performance.now() - t0) / 1000;
        seconds += dt;
        batchSeconds.push(dt);
        batches++;
        if (!Number.isFinite(loss)) { diverged = true; break; }
        samples += rows.length;
        steady.batchDone(batches, seconds, samples);
        lossSinceEval += loss; batchesSinceEval++;
        recentLoss.push(loss);
        if (recentLoss.length > 10) recentLoss.shift();
        if (batches - lastEvalBatch >= o.evalEveryBatches || seconds - lastEvalSeconds >= o.evalEverySeconds) evaluate();
      }
    }
    if (lastEvalBatch !== batches && evalRows.length > 0 && (o.evalEveryBatches < Infinity || o.evalEverySeconds < Infinity || o.evalAtStart))
      evaluate();
    let finalP1 = NaN;
    if (test && finalRows.length > 0) {
      const t0 = performance.now();
      finalP1 = precisionAt1(model, test, finalRows);
      evalSeconds += (performance.now() - t0) / 1000;
    }
    return {
      system: `tfjs-${backend}`,
      samplesPerSec: seconds > 0 ? samples / seconds : 0,
      steadySamplesPerSec: steady.rate(batches, seconds, samples),
      seconds, batchSeconds, samples, batches, finalP1, curve, diverged,
      finalLoss: recentLoss.length ? recentLoss.reduce((a, b) => a + b, 0) / recentLoss.length : NaN,
      evalSeconds,
      peakRssBytes: peakRssBytes(),
      info: { backend, threads: 1, tfjsVersion: tf.version.tfjs, optimizer: 'tf.train.adam (dense)' },
    };
  } finally {
    optimizer.dispose();
    disposeModel(model);
  }
}
