// Fixture of test/train/sharded.test.ts, run under `mpirun -np R` (uses the compiled dist/). A tiny network
// with a dense output layer (the softmax over every label: sampling cannot differ) is trained one step
// label-sharded and, on every rank, one step unsharded (netTrainSlice) from the same weights. Each rank
// prints one JSON line: the largest differences of the lower layers, of its output rows and of the loss,
// and of dL/dH summed over the shards against a TypeScript reference computed from the full network.
// With the argument `wide`, the output layer has a wide part: the reference's pairs are chosen over every
// label (buildWide), each rank holds its labels' share of them (pickWide), and the line also gives the
// largest differences of its wide weights and Adagrad sums after the step.
import { runAsRank } from '../../dist/src/train/distributed.js';
import { native } from '../../dist/src/native.js';
import { Network } from '../../dist/src/network/network.js';
import { ShardedModel, shardLabels, sliceConfig } from '../../dist/src/train/sharded.js';
import { labelFrequencies } from '../../dist/src/train/metrics.js';
import { buildWide, pickWide } from '../../dist/src/network/wide.js';

const D = 40, HID = 16, L = 11, N = 48;
const WIDE = process.argv[2] === 'wide' ? { maxPerLabel: 6, init: 2, lr: 0.1, minShare: 0 } : null;
const config = { inputDim: D, seed: 7, layers: [{ size: HID, activation: 'relu' }, { size: L, activation: 'softmax', ...(WIDE ? { wide: WIDE } : {}) }] };

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
  for (let t = 0; t < 3; t++) nat.netTrainSlice(ref.spec, data, all.subarray(8 * t, 8 * t + 16), { ...hyper, gradScale: 1 / 16 }, stats);

  const freq = labelFrequencies(data.labelIndices, L);
  const sharding = shardLabels(freq, comm.size);
  const mine = sharding.labelsOf[comm.rank];
  const net = new Network(sliceConfig(config, mine.length));
  ref.spec.layers.slice(0, -1).forEach((l, k) => {
    for (const a of ['weights', 'bias', 'mWeights', 'vWeights', 'mBias', 'vBias', 'rowSteps', 'biasSteps']) net.spec.layers[k][a].set(l[a]);
  });
  const ro = ref.spec.layers.at(-1), so = net.spec.layers.at(-1);
  mine.forEach((j, e) => {
    for (const a of ['weights', 'mWeights', 'vWeights']) so[a].set(ro[a].subarray(j * HID, (j + 1) * HID), e * HID);
    for (const a of ['bias', 'mBias', 'vBias', 'rowSteps']) so[a][e] = ro[a][j];
  });
  const model = new ShardedModel(comm, config, net, sharding, freq);
  if (WIDE) so.wide = pickWide(ro.wide, model.localOf);

  // dL/dH of a batch: sharded (phases 1-3, mode 2: nothing updated, summed over the ranks) against the
  // TypeScript reference from the full network's output layer.
  const batch = all.subarray(5, 5 + 30);
  const rows = batch.filter((p) => data.labelOffsets[p + 1] > data.labelOffsets[p]);
  const B = rows.length;
  const H = new Float32Array(B * HID);
  nat.netShardForward(net.spec, data, rows, 1, 0, L, H);
  const st = new Float64Array(3 * B);
  nat.netShardOutForward(net.spec, data, rows, H, model.localOf, 0, 0, null, st);
  const g = comm.allgatherv(new Uint8Array(st.buffer));
  const allSt = new Float64Array(g.data.buffer, g.data.byteOffset, g.data.byteLength / 8);
  const lse = new Float64Array(B);
  for (let i = 0; i < B; i++) {
    let M = -Infinity, s = 0;
    for (let r = 0; r < comm.size; r++) M = Math.max(M, allSt[r * 3 * B + 3 * i]);
    for (let r = 0; r < comm.size; r++) s += allSt[r * 3 * B + 3 * i + 1] * Math.exp(allSt[r * 3 * B + 3 * i] - M);
    lse[i] = M + Math.log(s);
  }
  const dH = new Float32Array(B * HID);
  nat.netShardOutBackward(net.spec, lse, { mode: 2, lr: 0, beta1: 0.9, beta2: 0.999, eps: 1e-8, gradScale: 1 / batch.length }, dH);
  comm.allreduceSum(dH);
  const dRef = new Float64Array(B * HID);
  for (let i = 0; i < B; i++) {
    const h = H.subarray(i * HID, (i + 1) * HID);
    const z = Array.from({ length: L }, (_, j) => { let a = ro.bias[j]; for (let q = 0; q < HID; q++) a += ro.weights[j * HID + q] * h[q]; return a; });
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
      for (let q = 0; q < HID; q++) dRef[i * HID + q] += dz * ro.weights[j * HID + q];
    }
  }
  const dHDiff = maxDiff(dH, dRef) / Math.max(1e-12, maxAbs(dRef));

  // One training step, sharded and unsharded, from the same state.
  const step = all.subarray(10, 10 + 24);
  const r = model.step(data, { pointIds: step, seed: 99, lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8 });
  nat.netTrainSlice(ref.spec, data, step, { ...hyper, seed: 99, gradScale: 1 / step.length }, stats);
  let lowerDiff = 0;
  ref.spec.layers.slice(0, -1).forEach((l, k) => {
    lowerDiff = Math.max(lowerDiff, maxDiff(l.weights, net.spec.layers[k].weights), maxDiff(l.bias, net.spec.layers[k].bias));
  });
  let outDiff = 0, moved = 0;
  mine.forEach((j, e) => {
    outDiff = Math.max(outDiff, maxDiff(ro.weights.subarray(j * HID, (j + 1) * HID), so.weights.subarray(e * HID, (e + 1) * HID)), Math.abs(ro.bias[j] - so.bias[e]));
    moved = Math.max(moved, Math.abs(ro.rowSteps[j] - so.rowSteps[e]));
  });
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
  io.out(JSON.stringify({ rank: comm.rank, labels: mine.length, dHDiff, lowerDiff, outDiff, stepsDiff: moved, loss: r.lossSum, refLoss: stats[0], wideDiff, accumDiff, widePairs, wideMoved }) + '\n');
  return 0;
});
process.exit(code);
