// Fixture of test/train/sharded-fit.test.ts, run under `mpirun -np R` (uses the compiled dist/). Every rank trains
// the same network in one process (one epoch, inline: deterministic), then takes its slices of it (its labels'
// output rows and wide pairs, its features' rows of layer 0) as a label-sharded rank holds them, and predicts a
// test set three ways: sampled with the cluster index built by the ranks together (buildShardIndex,
// predictSharded) against the whole network's own index and sampled prediction; exact (predictTopK) against the
// whole network's exact prediction; both at several logit scales (ValidationOptions.blend). Rank 0 prints one JSON
// line: per way, the share of points whose top-5 labels are the same list, and the largest probability difference.
// Arguments: data directory (train.txt, test.txt), then `nowide` to drop the wide part, `k=<n>` for the top-n (default
// 5), `widegain=<x>` to multiply the trained wide weights by x (a strong wide part: its proposals, merged from every
// rank, reach the top-k), `chunk=<n>` for predictSharded's and predictTopK's chunk of points (default 256 and 1024). Every rank compares its own
// result (the ranks probe and merge a share of the points each and exchange them): the JSON line holds the worst rank's.
import { join } from 'node:path';
import { runAsRank } from '../../dist/src/train/distributed.js';
import { Network } from '../../dist/src/network/network.js';
import { fit } from '../../dist/src/train/fit-network.js';
import { InlineExecutor } from '../../dist/src/network/executor.js';
import { readXC } from '../../dist/src/datasets/index.js';
import { labelFrequencies } from '../../dist/src/network/metrics.js';
import { allocateRank, featureFrequencies, ShardedModel, shardFeatures, shardLabels } from '../../dist/src/train/sharded.js';
import { buildShardIndex, predictSharded } from '../../dist/src/train/sharded-index.js';
import { pickWide } from '../../dist/src/network/wide.js';
import { defaultCandidates } from '../../dist/src/network/network.js';

const dir = process.argv[2];
const WIDE = !process.argv.includes('nowide');
const WIDE_GAIN = Number(process.argv.find((a) => a.startsWith('widegain='))?.slice(9) ?? 1);
const K = Number(process.argv.find((a) => a.startsWith('k='))?.slice(2) ?? 5);
const CHUNK = Number(process.argv.find((a) => a.startsWith('chunk='))?.slice(6) ?? 256);
const io = { out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s) };
const code = await runAsRank(io, async (dist) => {
  const train = await readXC(join(dir, 'train.txt'));
  const test = await readXC(join(dir, 'test.txt'));
  const L = train.labels;
  const config = {
    inputDim: train.features, seed: 5,
    layers: [
      { size: 32, activation: 'relu' },
      { size: L, activation: 'softmax', sampling: { hash: 'dwta', K: 4, L: 8, logQ: true, budget: 0 }, ...(WIDE ? { wide: { maxPerLabel: 16 } } : {}) },
    ],
  };
  const ref = new Network(config);
  await fit(ref, train, { epochs: 1, workers: 0, validation: false, lr: 0.01 });
  if (WIDE && WIDE_GAIN !== 1) for (let e = 0; e < ref.spec.layers.at(-1).wide.weights.length; e++) ref.spec.layers.at(-1).wide.weights[e] *= WIDE_GAIN;
  const comm = dist.comm;
  const labelFreq = labelFrequencies(train.labelIndices, L), featureFreq = featureFrequencies(train, train.features);
  const mine = shardLabels(labelFreq, comm.size).labelsOf[comm.rank];
  const feats = shardFeatures(featureFreq, comm.size).featuresOf[comm.rank];
  const spec = allocateRank(config, mine.length, feats.length);
  const H0 = 32, d = 32;
  const r0 = ref.spec.layers[0], s0 = spec.layers[0];
  feats.forEach((f, e) => s0.weights.set(r0.weights.subarray(f * H0, (f + 1) * H0), e * H0));
  s0.bias.set(r0.bias);
  const ro = ref.spec.layers.at(-1), so = spec.layers.at(-1);
  mine.forEach((j, e) => {
    so.weights.set(ro.weights.subarray(j * d, (j + 1) * d), e * d);
    so.bias[e] = ro.bias[j];
  });
  const model = new ShardedModel(comm, config, { spec }, labelFreq, featureFreq);
  if (WIDE) so.wide = pickWide(ro.wide, model.localOf);
  const scales = [1, 0.5, 0.25];
  const cand = defaultCandidates(L);
  ref.labelFreq = labelFreq;
  ref.buildClusterIndex({ iters: 2 });
  const exec = new InlineExecutor();
  const want = await ref.predictScaled(exec, test, K, 'sampled', 256, cand, scales);
  const idx = buildShardIndex(model, ref.seed, { iters: 2 });
  const got = predictSharded(model, idx, test, K, scales, cand, CHUNK);
  const compare = (a, b) => {
    let same = 0, maxProb = 0;
    for (let i = 0; i < test.points; i++) {
      let eq = true;
      for (let e = 0; e < K; e++) {
        if (a.labels[i * K + e] !== b.labels[i * K + e]) eq = false;
        else maxProb = Math.max(maxProb, Math.abs(a.scores[i * K + e] - b.scores[i * K + e]));
      }
      if (eq) same++;
    }
    return { same: same / test.points, maxProb };
  };
  const sampled = scales.map((_, si) => compare(want[si], { labels: got.labels[si], scores: got.scores[si] }));
  const exactWant = await ref.predictScaled(exec, test, K, 'exact', 256, 0, scales);
  const exact = scales.map((x, si) => compare(exactWant[si], model.predictTopK(test, K, CHUNK === 256 ? 1024 : CHUNK, x)));
  // The worst rank's: every rank returns the whole result.
  const worst = (mineW) => {
    const g = comm.allgatherv(new TextEncoder().encode(JSON.stringify(mineW).padEnd(4096)));
    const text = new TextDecoder().decode(g.data);
    const all = Array.from({ length: comm.size }, (_, r) => JSON.parse(text.slice(4096 * r, 4096 * (r + 1))));
    return mineW.map((_, e) => ({ same: Math.min(...all.map((w) => w[e].same)), maxProb: Math.max(...all.map((w) => w[e].maxProb)) }));
  };
  const sampledAll = worst(sampled), exactAll = worst(exact);
  if (comm.rank === 0) {
    io.out(JSON.stringify({
      ranks: comm.size, sampled: sampledAll, exact: exactAll, scoredShard: got.outputsScoredPerPoint, scoredOne: want[0].outputsScoredPerPoint,
      clusters: idx.sizes.length, head: idx.headTotal,
    }) + '\n');
  }
  return 0;
});
process.exit(code);
