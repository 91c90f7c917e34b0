// `sublinear eval --model <sharded checkpoint> --distributed` (under mpirun): each rank loads only its slices of
// a label-sharded checkpoint (labels and input features, re-sharded to this job's ranks), scores every label of
// its slice for each test point, and the ranks' top-k are merged (src/train/sharded.ts, ShardedModel.evaluate);
// rank 0 prints.
import { applyInputScale } from '../network/input-scale.js';
import type { DistributedRun } from '../train/distributed.js';
import { loadShardedPart, newestShardCheckpoint, readShardManifest } from '../train/shard-checkpoint.js';
import { ShardedModel } from '../train/sharded.js';
import { peakRssMB } from '../util/peak-rss.js';
import { UsageError } from './args.js';
import { checkEvaluable, checkFits, metricLine, type Out } from './engine.js';
import { loadData } from './data-loading.js';
import { parseKs, type EvalCliOptions } from './eval-predict-options.js';

export async function evalShardedOn(o: EvalCliOptions, io: Out, dist: DistributedRun): Promise<number> {
  if (o.mode === 'sampled') throw new UsageError('--distributed scores every label of each slice exactly: leave out --mode sampled');
  if (o.format === 'text') throw new UsageError('--distributed reads numeric test data (XC or LIBSVM)');
  const quiet = !!o.quiet || !dist.isRoot;
  const picked = dist.agree(dist.isRoot ? (await newestShardCheckpoint(o.model)) ?? '' : '');
  if (!picked) {
    throw new Error(`${o.model}: no complete sharded checkpoint (eval --distributed reads the --checkpoint directory of train --shard-labels; ` +
      'a model file is read by eval without --distributed)');
  }
  const manifest = await readShardManifest(picked);
  const L = manifest.config.layers.at(-1)!.size;
  const part = await loadShardedPart(picked, manifest, dist.rank, dist.size);
  const ks = o.k !== undefined ? parseKs(o.k, L) : [1, 3, 5].filter((k) => k <= L);
  let test = await loadData(o.test, o.format as 'xc' | 'libsvm' | undefined, 'test data', quiet, undefined, o.zeroBased);
  checkEvaluable(test, o.test);
  checkFits(test, o.test, manifest.config.inputDim, L);
  if (part.inputScale) test = applyInputScale(test, part.inputScale);
  const model = new ShardedModel(dist.comm, manifest.config, { spec: part.spec }, part.labelFreq, part.featureFreq);
  const t0 = performance.now();
  const m = model.evaluate(test, ks, manifest.trainPoints, { A: o.propensityA, B: o.propensityB });
  const seconds = (performance.now() - t0) / 1000;
  const rss = new Float64Array(dist.size);
  rss[dist.rank] = peakRssMB();
  dist.comm.allreduceSum(rss);
  if (!dist.isRoot) return 0;
  if (o.json) {
    io.out(JSON.stringify({ ...m, mode: 'exact', seconds, pointsPerSec: m.points / seconds, ranks: dist.size, checkpoint: picked, peakRssMBPerRank: Array.from(rss) }) + '\n');
  } else {
    io.out(`${metricLine(m, ks)}\n(${m.points} points predicted in ${seconds.toFixed(2)} s on ${dist.size} rank(s), exact: every label scored on its rank)\n`);
  }
  return 0;
}
