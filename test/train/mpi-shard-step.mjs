// Fixture of test/train/sharded.test.ts, run under `mpirun -np R` (uses the compiled dist/). A tiny network
// with a dense output layer (the softmax over every label: sampling cannot differ) and dropout on its hidden
// layers is trained one step label-sharded (labels and input features) and, on every rank, one step unsharded
// (netTrainSlice, one worker) from the same weights on the same batch. Each rank prints one JSON line: the
// largest differences of layer 0 gathered from every rank's feature slice, of the replicated parts (layer 0's
// bias, the middle layers), of its output rows and of the loss, of dL/dH summed over the shards against a
// TypeScript reference computed from the full network, the checksums of every rank's replicated parts, and
// the step's exchange volume against its formula.
// Arguments: `wide` (the output layer has a wide part: the reference's pairs are chosen over every label,
// each rank holds its labels' share, and the line gives the largest differences of its wide weights and
// Adagrad sums; with `scan` too, the rank's wide part has no label-major index), `deep` (two hidden layers:
// the middle one computed and updated alike on every rank).
import { runAsRank } from '../../dist/src/train/distributed.js';
import { native } from '../../dist/src/native/addon.js';
import { Network } from '../../dist/src/network/network.js';
import { allocateRank, arraysChecksum, featureFrequencies, replicatedArrays, ShardedModel, shardFeatures, shardLabels, wideByLabel } from '../../dist/src/train/sharded.js';
import { labelFrequencies } from '../../dist/src/network/metrics.js';
import { buildWide, pickWide } from '../../dist/src/network/wide.js';

const D = 40, HID = 16, MID = 12, L = 11, N = 48;
const WIDE = process.argv.includes('wide') ? { maxPerLabel: 6, init: 2, lr: 0.1, minShare: 0 } : null;
const DEEP = process.argv.includes('deep');
const config = {
  inputDim: D, seed: 7,
  layers: [
    { size: HID, activation: 'relu', dropout: 0.3 },
    ...(DEEP ? [{ size: MID, activation: 'relu', dropout: 0.2 }] : []),
    { size: L, activation: 'softmax', ...(WIDE ? { wide: WIDE } : {}) },
  ],
};
const d = DEEP ? MID : HID;

// A seeded dataset: 4-6 features and 1-3 labels per point (some points without labels).
function dataset() {
  let s = 12345;
  const rnd = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32);
  const offsets = [0], indices = [], values = [], labelOffsets = [0], labelIndices = [];
  for (let i = 0; i < N; i++) {
    const f = new Set();
    while (f.size < 4 + Math.floor(rnd() * 3)) f.add(Math.floor(rnd() * D));
    for (const x of [...f].sort((a, b) => a - b)) indices.push(x), values.push(0.2 + rnd());
    offsets.push(indices.length);
    const l = new Set();
    const nl = i % 9 === 4 ? 0 : 1 + Math.floor(rnd() * 3);
    while (l.size < nl) l.add(Math.floor(rnd() * L));
    for (const x of [...l].sort((a, b) => a - b)) labelIndices.push(x);
    labelOffsets.push(labelIndices.length);
  }
  return {
    points: N, features: D, labels: L, offsets: Uint32Array.from(offsets), indices: Uint32Array.from(indices),
    values: Float32Array.from(values), labelOffsets: Uint32Array.from(labelOffsets), labelIndices: Uint32Array.from(labelIndices),
  };
}

const maxDiff = (a, b) => { let m = 0; for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i])); return m; };
const maxAbs = (a) => { let m = 0; for (const x of a) m = Math.max(m, Math.abs(x)); return m; };

const io = { out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s) };
const code = await runAsRank(io, async (dist) => {
  const data = dataset();
  const comm = dist.comm;
  const ref = new Network(config);
  if (WIDE) ref.spec.layers.at(-1).wide = buildWide(data, null, D, L, WIDE.maxPerLabel, WIDE.init, WIDE.minShare);
  // Train the reference a few steps first, so that the compared step starts from non-trivial Adam state.
  const nat = native();
  const hyper = { mode: 0, lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8, seed: 1, ...(WIDE ? { wideLr: WIDE.lr } : {}) };
  const all = Uint32Array.from({ length: N }, (_, i) => i);
  const stats = new Float64Array(4);
  for (let t = 0; t < 3; t++) nat.netTrainSlice(ref.spec, data, all.subarray(8 * t, 8 * t + 16), { ...hyper, seed: t + 1, gradScale: 1 / 16 }, stats);

  // This rank's part, copied from the reference: its features' rows of layer 0, its labels' output rows, the rest whole.
  const labelFreq = labelFrequencies(data.labelIndices, L), featureFreq = featureFrequencies(data, D);
  const mine = shardLabels(labelFreq, comm.size).labelsOf[comm.rank];
  const feats = shardFeatures(featureFreq, comm.size).featuresOf[comm.rank];
  const spec = allocateRank(config, mine.length, feats.length);
  const r0 = ref.spec.layers[0], s0 = spec.layers[0];
  feats.forEach((f, e) => {
    for (const a of ['weights', 'mWeights', 'vWeights']) s0[a].set(r0[a].subarray(f * HID, (f + 1) * HID), e * HID);
    s0.rowSteps[e] = r0.rowSteps[f];
  });
  for (const a of ['bias', 'mBias', 'vBias', 'biasSteps']) s0[a].set(r0[a]);
  ref.spec.layers.slice(1, -1).forEach((l, i) => {
    for (const a of ['weights', 'bias', 'mWeights', 'vWeights', 'mBias', 'vBias', 'rowSteps', 'biasSteps']) spec.layers[i + 1][a].set(l[a]);
  });
  const ro = ref.spec.layers.at(-1), so = spec.layers.at(-1);
  mine.forEach((j, e) => {
    for (const a of ['weights', 'mWeights', 'vWeights']) so[a].set(ro[a].subarray(j * d, (j + 1) * d), e * d);
    for (const a of ['bias', 'mBias', 'vBias', 'rowSteps']) so[a][e] = ro[a][j];
  });
  const model = new ShardedModel(comm, config, { spec }, labelFreq, featureFreq);
  if (WIDE) {
    so.wide = pickWide(ro.wide, model.localOf);
    // As the model builds it for its own wide part: netShardOutForward reads the active labels' pairs label by
    // label (`scan`: without it, every pair of the batch's features is read and filtered).
    if (!process.argv.includes('scan')) so.wide.byLabel = wideByLabel(so.wide, mine.length);
  }

  // dL/dH of a batch: sharded (phases 1-4, mode 2: nothing updated, summed over the ranks) against the
  // TypeScript reference from the full network's output layer.
  const batch = all.subarray(5, 5 + 30);
  const rows = batch.filter((p) => data.labelOffsets[p + 1] > data.labelOffsets[p]);
  const B = rows.length;
  const Z = new Float32Array(batch.length * HID);
  if (nat.netShardInput(spec, data, batch, 1, model.featureOf, Z) !== B) throw new Error('netShardInput: wrong count of labelled points');
  const Zb = Z.subarray(0, B * HID);
  comm.allreduceSum(Zb);
  const H = new Float32Array(B * d);
  nat.netShardHidden(spec, Zb, 1, 5, H);
  const st = new Float64Array(3 * B);
  nat.netShardOutForward(spec, data, rows, H, model.localOf, 0, 0, null, st);
  const g = comm.allgatherv(new Uint8Array(st.buffer));
  const allSt = new Float64Array(g.data.buffer, g.data.byteOffset, g.data.byteLength / 8);
  const lse = new Float64Array(B);
  for (let i = 0; i < B; i++) {
    let M = -Infinity, s = 0;
    for (let r = 0; r < comm.size; r++) M = Math.max(M, allSt[r * 3 * B + 3 * i]);
    for (let r = 0; r < comm.size; r++) s += allSt[r * 3 * B + 3 * i + 1] * Math.exp(allSt[r * 3 * B + 3 * i] - M);
    lse[i] = M + Math.log(s);
  }
  const dH = new Float32Array(B * d);
  nat.netShardOutBackward(spec, lse, { mode: 2, lr: 0, beta1: 0.9, beta2: 0.999, eps: 1e-8, gradScale: 1 / batch.length }, dH);
  comm.allreduceSum(dH);
  const dRef = new Float64Array(B * d);
  for (let i = 0; i < B; i++) {
    const h = H.subarray(i * d, (i + 1) * d);
    const z = Array.from({ length: L }, (_, j) => { let a = ro.bias[j]; for (let q = 0; q < d; q++) a += ro.weights[j * d + q] * h[q]; return a; });
    const p = rows[i], labs = data.labelIndices.subarray(data.labelOffsets[p], data.labelOffsets[p + 1]);
    if (WIDE) {
      const w = ro.wide;
      for (let q = data.offsets[p]; q < data.offsets[p + 1]; q++) {
        const f = data.indices[q];
        for (let e = w.offsets[f]; e < w.offsets[f + 1]; e++) z[w.labels[e]] += data.values[q] * w.weights[e];
      }
    }
    const m = Math.max(...z), den = z.reduce((a, x) => a + Math.exp(x - m), 0);
    for (let j = 0; j < L; j++) {
      let dz = Math.exp(z[j] - m) / den;
      if (labs.includes(j)) dz -= 1 / labs.length;
      dz /= batch.length;
      for (let q = 0; q < d; q++) dRef[i * d + q] += dz * ro.weights[j * d + q];
    }
  }
  const dHDiff = maxDiff(dH, dRef) / Math.max(1e-12, maxAbs(dRef));

  // One training step, sharded and unsharded (one worker: netTrainSlice on the whole batch), from the same state.
  const step = all.subarray(10, 10 + 24);
  const r = model.step(data, { pointIds: step, seed: 99, lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8 });
  nat.netTrainSlice(ref.spec, data, step, { ...hyper, seed: 99, gradScale: 1 / step.length }, stats);
  // Layer 0 gathered from every rank's feature slice (ids and rows), against the reference's.
  const msg = new Float32Array(feats.length * (HID + 1));
  feats.forEach((f, e) => { msg[e * (HID + 1)] = f; msg.set(s0.weights.subarray(e * HID, (e + 1) * HID), e * (HID + 1) + 1); });
  const gw = comm.allgatherv(new Uint8Array(msg.buffer));
  const rowsAll = new Float32Array(gw.data.buffer.slice(gw.data.byteOffset, gw.data.byteOffset + gw.data.byteLength));
  const W0 = new Float32Array(D * HID).fill(NaN);
  for (let e = 0; e < rowsAll.length / (HID + 1); e++) W0.set(rowsAll.subarray(e * (HID + 1) + 1, (e + 1) * (HID + 1)), rowsAll[e * (HID + 1)] * HID);
  let layer0Diff = W0.some(Number.isNaN) ? Infinity : maxDiff(W0, r0.weights);
  feats.forEach((f, e) => { layer0Diff = Math.max(layer0Diff, Math.abs(s0.rowSteps[e] - r0.rowSteps[f]) * 1e9); });
  let replicatedDiff = Math.max(maxDiff(s0.bias, r0.bias), s0.biasSteps[0] === r0.biasSteps[0] ? 0 : Infinity);
  ref.spec.layers.slice(1, -1).forEach((l, i) => {
    replicatedDiff = Math.max(replicatedDiff, maxDiff(l.weights, spec.layers[i + 1].weights), maxDiff(l.bias, spec.layers[i + 1].bias));
  });
  let outDiff = 0, moved = 0;
  mine.forEach((j, e) => {
    outDiff = Math.max(outDiff, maxDiff(ro.weights.subarray(j * d, (j + 1) * d), so.weights.subarray(e * d, (e + 1) * d)), Math.abs(ro.bias[j] - so.bias[e]));
    moved = Math.max(moved, Math.abs(ro.rowSteps[j] - so.rowSteps[e]));
  });
  // Every rank's checksum of its replicated parts (they must be bit-identical).
  const cs = comm.allgatherv(new TextEncoder().encode(arraysChecksum(replicatedArrays(spec))));
  const text = new TextDecoder().decode(cs.data);
  const checksums = Array.from({ length: comm.size }, (_, q) => text.slice(16 * q, 16 * q + 16));
  // The wide part: this rank's pairs against the reference's pairs of its labels, after the step.
  let wideDiff = null, accumDiff = null, widePairs = 0, wideMoved = 0;
  if (WIDE) {
    const want = pickWide(ro.wide, model.localOf);
    if (want.labels.join() !== so.wide.labels.join() || want.offsets.join() !== so.wide.offsets.join()) throw new Error('the slice\'s wide pairs differ from the reference\'s');
    wideDiff = maxDiff(want.weights, so.wide.weights);
    accumDiff = maxDiff(want.accum, so.wide.accum);
    widePairs = want.labels.length;
    wideMoved = maxAbs(want.accum); // the step (and the 3 before it) moved the wide weights
  }
  const rep = model.report();
  const Bs = step.filter((p) => data.labelOffsets[p + 1] > data.labelOffsets[p]).length, ring = (2 * (comm.size - 1)) / comm.size;
  // Z and dH all-reduced, 24 bytes of softmax statistics per sample and 8 of flags (a stop, a checkpoint due) per step.
  const bytesWant = comm.size > 1 ? ring * 4 * Bs * HID + 24 * Bs + 8 + ring * 4 * Bs * d : 0;
  io.out(JSON.stringify({
    rank: comm.rank, labels: mine.length, features: feats.length, dHDiff, layer0Diff, replicatedDiff, outDiff, stepsDiff: moved, loss: r.lossSum, refLoss: stats[0],
    wideDiff, accumDiff, widePairs, wideMoved, checksums, bytesPerStep: rep.bytesSentPerStep, bytesWant, split: rep.split,
  }) + '\n');
  return 0;
});
process.exit(code);
