// Fixture of test/train/sharded.test.ts, run under `mpirun -np 2`: label-sharded steps on a tiny network;
// rank 1 dies (SIGKILL) after two steps while rank 0 goes on into the next step's collectives: mpirun must
// end the job naming rank 1 (no rank waits forever). Uses the compiled dist/.
import { runAsRank } from '../../dist/src/train/distributed.js';
import { allocateRank, featureFrequencies, ShardedModel, shardFeatures, shardLabels } from '../../dist/src/train/sharded.js';
import { labelFrequencies } from '../../dist/src/network/metrics.js';

const D = 20, L = 6, N = 32;
const config = { inputDim: D, seed: 1, layers: [{ size: 8 }, { size: L }] };
const data = {
  points: N, features: D, labels: L,
  offsets: Uint32Array.from({ length: N + 1 }, (_, i) => 2 * i), indices: new Uint32Array(2 * N),
  values: new Float32Array(2 * N).fill(0.5), labelOffsets: Uint32Array.from({ length: N + 1 }, (_, i) => i), labelIndices: Uint32Array.from({ length: N }, (_, i) => i % L),
};
// Two features per point, strictly increasing ids.
for (let i = 0; i < N; i++) data.indices.set([i % (D - 1), (i % (D - 1)) + 1], 2 * i);
const io = { out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s) };
const code = await runAsRank(io, async (dist) => {
  const freq = labelFrequencies(data.labelIndices, L), featureFreq = featureFrequencies(data, D);
  const spec = allocateRank(config, shardLabels(freq, dist.size).labelsOf[dist.rank].length, shardFeatures(featureFreq, dist.size).featuresOf[dist.rank].length);
  const model = new ShardedModel(dist.comm, config, { spec }, freq, featureFreq);
  const ids = Uint32Array.from({ length: 16 }, (_, i) => i);
  for (let t = 0; t < 50; t++) {
    if (t === 2 && dist.rank === 1) process.kill(process.pid, 'SIGKILL');
    model.step(data, { pointIds: ids, seed: t, lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8 });
  }
  return 0;
});
process.exit(code);
