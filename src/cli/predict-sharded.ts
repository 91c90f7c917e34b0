// `sublinear predict --model <sharded checkpoint> --input data.txt --distributed` (under mpirun): each rank
// loads only its slices of a label-sharded checkpoint (labels and input features, re-sharded to this job's
// ranks) and scores every label of its slice; the ranks' top-k are merged (ShardedModel.predictTopK) and rank 0
// writes the predictions.
import { applyInputScale } from '../network/input-scale.js';
import { mapFeatures } from '../network/input-map.js';
import type { DistributedRun } from '../train/distributed.js';
import { loadShardedPart, newestShardCheckpoint, readShardManifest } from '../train/shard-checkpoint.js';
import { ShardedModel } from '../train/sharded.js';
import { UsageError } from './args.js';
import { jobEvents, type Out } from './engine.js';
import { loadData } from '../job/data-loading.js';
import { writePredictions } from './predict-output.js';
import { predictK, type PredictJob } from '../job/eval-predict-options.js';
import { Reporter } from '../job/events.js';

export async function predictShardedOn(o: PredictJob, io: Out, dist: DistributedRun): Promise<number> {
  if (o.input === '-') throw new UsageError('--distributed reads --input from a file (every rank reads it), not standard input');
  if (o.mode === 'sampled') throw new UsageError('--distributed scores every label of each slice exactly: leave out --mode sampled');
  if (o.inputFormat === 'text') throw new UsageError('--distributed reads numeric input (XC or LIBSVM)');
  const quiet = !!o.quiet || !dist.isRoot;
  const picked = dist.agree(dist.isRoot ? (await newestShardCheckpoint(o.model)) ?? '' : '');
  if (!picked) throw new Error(`${o.model}: no complete sharded checkpoint (predict --distributed reads the --checkpoint directory of train --distributed)`);
  const manifest = await readShardManifest(picked);
  const L = manifest.config.layers.at(-1)!.size;
  // A sharded checkpoint holds no calibration: the threshold is of the softmax scores.
  if (o.threshold === 'model') throw new UsageError('option --threshold model needs a calibrated model file; a sharded checkpoint has none (give a score in (0, 1])');
  if (o.explain !== undefined) throw new UsageError('--distributed does not explain predictions (--explain): predict from a model file');
  const threshold = o.threshold;
  const k = predictK({ k: o.k, threshold }, L);
  const part = await loadShardedPart(picked, manifest, dist.rank, dist.size);
  let data = await loadData(o.input, o.inputFormat as 'xc' | 'libsvm' | undefined, 'input', new Reporter(jobEvents(io), quiet), undefined, o.zeroBased);
  const declared = manifest.inputFeatures ?? manifest.config.inputDim;
  if (data.features > declared) throw new Error(`${o.input} has ${data.features} features but the network's inputDim is ${declared}`);
  if (part.inputMap) data = mapFeatures(data, part.inputMap);
  data = applyInputScale(data, part.inputScale, part.inputLog);
  const model = new ShardedModel(dist.comm, manifest.config, { spec: part.spec }, part.labelFreq, part.featureFreq);
  const p = model.predictTopK(data, k);
  if (dist.isRoot) await writePredictions({ points: data.points, k, labels: p.labels, scores: p.scores, outputsScoredPerPoint: L }, o.format ?? 'xc', L, io, { threshold });
  return 0;
}
