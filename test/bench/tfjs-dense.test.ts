import { describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import type { SparseDataset } from '../../src/datasets/csr.js';
import { Xoshiro128 } from '../../src/util/rng.js';
import { tinyProblem } from './tiny-problem.js';
import { gatherBatch } from '../../bench/baselines/common.js';
import {
  disposeBatch, initTfjs, sparseBatchTensors, sparseMatMul, trainTfjs,
} from '../../bench/baselines/tfjs-dense.js';

describe('tfjs dense baseline', () => {
  it('sparse first-layer custom gradient equals the dense-input gradient (tf.grad)', async () => {
    await initTfjs('wasm');
    // 4 rows, features 0..5; row 1 and row 3 (the last) are empty, feature 2 is shared (duplicate scatter).
    const ds: SparseDataset = {
      points: 4, features: 6, labels: 2,
      offsets: Uint32Array.from([0, 3, 3, 5, 5]),
      indices: Uint32Array.from([0, 2, 5, 2, 3]),
      values: Float32Array.from([1.5, -2, 0.5, 3, 0.25]),
      labelOffsets: Uint32Array.from([0, 1, 2, 3, 4]), labelIndices: Uint32Array.from([0, 1, 0, 1]),
    };
    const rows = Uint32Array.from([0, 1, 2, 3]);
    const g = gatherBatch(ds, rows);
    const t = sparseBatchTensors(g);
    const dense = new Float32Array(4 * 6);
    for (let p = 0; p < g.idx.length; p++) dense[g.seg[p]! * 6 + g.idx[p]!] += g.vals[p]!;
    const rng = new Xoshiro128(3);
    const W = tf.tensor2d(Float32Array.from({ length: 6 * 5 }, () => rng.normal()), [6, 5]);
    const R = tf.tensor2d(Float32Array.from({ length: 4 * 5 }, () => rng.normal()), [4, 5]);
    const X = tf.tensor2d(dense, [4, 6]);
    const fSparse = (w: tf.Tensor) => tf.sum(tf.mul(tf.tanh(sparseMatMul(w as tf.Tensor2D, t)), R));
    const fDense = (w: tf.Tensor) => tf.sum(tf.mul(tf.tanh(tf.matMul(X, w as tf.Tensor2D)), R));
    const ySparse = sparseMatMul(W, t).arraySync();
    const yDense = tf.matMul(X, W).arraySync();
    const gSparse = tf.grad(fSparse)(W).arraySync() as number[][];
    const gDense = tf.grad(fDense)(W).arraySync() as number[][];
    expect(ySparse.length).toBe(4);
    for (let i = 0; i < 4; i++) for (let j = 0; j < 5; j++) expect(ySparse[i]![j]).toBeCloseTo(yDense[i]![j]!, 5);
    for (let i = 0; i < 6; i++) for (let j = 0; j < 5; j++) expect(gSparse[i]![j]).toBeCloseTo(gDense[i]![j]!, 5);
    // rows 1 and 4 (feature ids absent from the batch) get zero gradient
    expect(gSparse[1]!.every((v) => v === 0)).toBe(true);
    disposeBatch(t);
    tf.dispose([W, R, X]);
  });

  it('loss decreases and P@1 rises on a tiny generated problem, without leaking tensors', async () => {
    await initTfjs('wasm');
    const train = tinyProblem(600, 1), test = tinyProblem(200, 2);
    const before = tf.memory().numTensors;
    const records: { p1: number; loss: number; seconds: number }[] = [];
    const r = await trainTfjs({
      train, test, hidden: [16], epochs: 4, batchSize: 32, lr: 1e-2, seed: 5,
      evalEvery: 19, evalPoints: 200, onEval: (e) => records.push(e),
    });
    expect(tf.memory().numTensors).toBe(before);
    expect(r.diverged).toBe(false);
    expect(r.batches).toBe(4 * Math.ceil(600 / 32));
    expect(r.samples).toBe(4 * 600);
    expect(r.samplesPerSec).toBeGreaterThan(0);
    expect(r.batchSeconds.length).toBe(r.batches);
    expect(r.batchSeconds.reduce((a, b) => a + b, 0)).toBeCloseTo(r.seconds, 6);
    expect(records.length).toBeGreaterThanOrEqual(4);
    expect(records[0]!.seconds).toBe(0);
    const losses = records.slice(1).map((e) => e.loss);
    expect(losses[losses.length - 1]!).toBeLessThan(0.8 * losses[0]!);
    expect(r.finalP1).toBeGreaterThan(0.8);
    expect(r.finalP1).toBeGreaterThan(records[0]!.p1 + 0.3);
    expect(r.curve.map((c) => c.seconds)).toEqual([...r.curve.map((c) => c.seconds)].sort((a, b) => a - b));
  });

  it('detects divergence', async () => {
    const train = tinyProblem(200, 3);
    train.values.fill(3e38); // overflows the activations -> Inf/NaN loss
    const r = await trainTfjs({ train, hidden: [8], epochs: 1, batchSize: 200, lr: 1e-3, seed: 1 });
    expect(r.diverged).toBe(true);
    expect(Number.isNaN(r.finalP1)).toBe(true);
  });
});
