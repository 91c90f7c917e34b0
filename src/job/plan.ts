// plan(job): what `sublinear plan` does, as one library call: the plan of a training job before anything is
// allocated. The data's shape (a file's, a known shape's, or given counts), the network the defaults rule (or
// a configuration file) builds, this machine's measured costs (a timing probe, cached per CPU and widths:
// src/train/calibrate.ts), and the modes and rank counts to consider give memory per rank by part, predicted
// samples/s and epoch time, and the configuration to use (src/train/plan.ts).
import { defaultConfig, resolveConfig, type NetworkConfig } from '../network/config.js';
import { calibrate, defaultCalibrationFile, readCachedCalibration, writeCachedCalibration } from '../train/calibrate.js';
import { planTraining, PLAN_SHAPES, scanDataShape, shapeFromCounts, type DataShape, type PlanMode, type TrainingPlan } from '../train/plan.js';
import { UsageError } from '../util/usage-error.js';
import { networkOfFile, readConfigFile } from './config-file.js';
import { Reporter, type JobEvents } from './events.js';
import { checkInputFile } from './preflight.js';

/** The options of a plan (`sublinear plan`'s flags, in camelCase, lists as arrays). */
export interface PlanJob extends JobEvents {
  /** Training data (XC format with its header): its shape and label and feature frequencies are read. */
  data?: string;
  /** A known shape instead of a data file (PLAN_SHAPES: 'amazon-670k', 'amazon-3m', ...). */
  shape?: keyof typeof PLAN_SHAPES;
  /** The shape as counts, instead of a data file: all five together. */
  points?: number;
  features?: number;
  labels?: number;
  avgNnz?: number;
  avgLabels?: number;
  /** Network and training options as train's `config` file holds them. Default: the defaults rule. */
  config?: string;
  /** Width of the default network's hidden layer. Default: the defaults rule. */
  hidden?: number;
  /** Global batch. Default 128, or the config file's batchSize. */
  batch?: number;
  /** A fixed number of epochs (no copy of the best epoch's weights kept). Default: held-out early stopping. */
  epochs?: number;
  /** Worker threads per rank. Default: the defaults rule. */
  workers?: number;
  /** One process: threads sharing each batch. Default: the defaults rule. */
  threads?: number;
  /** Cores per machine. Default: this machine's. */
  cores?: number;
  /** Memory per machine, bytes (the plan keeps 90%). Default: this machine's. */
  memoryBytes?: number;
  /** Ranks started on each machine (they share its cores and memory). Default 1. */
  ranksPerMachine?: number;
  /** Link speeds in Gb/s; the first is used to choose. Default [10]. */
  linkGbps?: number[];
  /** Latency of one message, microseconds. Default 20. */
  latencyUs?: number;
  /** Rank counts to consider. Default [1]. */
  ranks?: number[];
  /** Modes to consider. Default: all. */
  modes?: PlanMode[];
  /** Run the timing probe even when a cached calibration exists. Default false. */
  recalibrate?: boolean;
  /** Calibration cache file. Default: $SUBLINEAR_CACHE_DIR or ~/.cache/sublinear, calibration.json. */
  calibration?: string;
  /** No information lines (progress of the probe). Default false. */
  quiet?: boolean;
}

/** What plan() returns: the plan, what the shape came from, and whether the machine's costs were cached. */
export interface PlanResult {
  plan: TrainingPlan;
  /** The data file, the known shape's name, or 'the given counts'. */
  source: string;
  /** The calibration came from the cache (no probe ran). */
  cached: boolean;
  /** The calibration cache file. */
  cacheFile: string;
}

const COUNTS = ['points', 'features', 'labels', 'avgNnz', 'avgLabels'] as const;

/**
 * Plans a training job as `sublinear plan` does.
 *
 * @example
 * ```ts
 * import { plan } from 'sublinear';
 * const { plan: p } = await plan({ shape: 'amazon-670k', ranks: [1, 2, 4] });
 * console.log(p.reason, p.chosen.samplesPerSec);
 * ```
 */
export async function plan(job: PlanJob): Promise<PlanResult> {
  const r = new Reporter(job, !!job.quiet);
  const baseRssBytes = process.memoryUsage().rss;
  checkSources(job);
  if (job.data !== undefined) await checkInputFile(job.data, 'data');
  const file = job.config !== undefined ? await readConfigFile(job.config) : undefined;
  const { shape, source } = await dataShape(job, r);
  let config: NetworkConfig;
  if (file) {
    config = networkOfFile(file, shape);
  } else {
    config = defaultConfig(shape);
    if (job.hidden !== undefined) config.layers[0] = { ...config.layers[0]!, size: job.hidden };
  }
  let resolved;
  try {
    resolved = resolveConfig(config);
  } catch (e) {
    throw file ? new Error(`${job.config}: ${(e as Error).message}`) : e;
  }
  if (shape.features > resolved.inputDim) throw new Error(`${source} has ${shape.features} features but the configuration's inputDim is ${resolved.inputDim}`);
  const batch = job.batch ?? file?.training.batchSize ?? 128;
  const workers = job.workers ?? file?.training.workers;
  const threads = job.threads ?? file?.training.threads;
  const bestWeights = (job.epochs ?? file?.training.epochs) === undefined && file?.training.validation !== false;
  const cacheFile = job.calibration ?? defaultCalibrationFile();
  let cal = job.recalibrate ? null : await readCachedCalibration(resolved, cacheFile);
  const cached = cal !== null;
  if (!cal) {
    r.say('measuring this machine (timing probe: a few seconds to a minute)');
    cal = await calibrate({ config: resolved, shape, batch, baseRssBytes });
    try {
      await writeCachedCalibration(resolved, cal, cacheFile);
    } catch (e) {
      if (!r.quiet) r.warn(`could not cache the calibration in ${cacheFile}: ${(e as Error).message}`);
    }
  }
  const links = job.linkGbps ?? [10];
  const m = job;
  const p = planTraining({
    shape, config: resolved, batch, ...(workers !== undefined ? { workers } : {}), ...(threads !== undefined ? { threads } : {}),
    ranks: job.ranks ?? [1], linkGbps: links, ...(job.modes ? { modes: job.modes } : {}), bestWeights,
    machine: {
      ...(m.cores !== undefined ? { cores: m.cores } : {}), ...(m.memoryBytes !== undefined ? { memoryBytes: m.memoryBytes } : {}),
      linkGbps: links[0]!, latency: (m.latencyUs ?? 20) * 1e-6, ...(m.ranksPerMachine !== undefined ? { ranksPerMachine: m.ranksPerMachine } : {}),
    },
  }, cal);
  return { plan: p, source, cached, cacheFile };
}

/** One source of the shape: a data file, a known shape, or all five counts (valid ones). */
function checkSources(job: PlanJob): void {
  const flagName = (k: string) => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
  const countsGiven = COUNTS.filter((k) => job[k] !== undefined);
  const sources = [job.data !== undefined, job.shape !== undefined, countsGiven.length > 0].filter(Boolean).length;
  if (sources === 0) throw new UsageError('give a data file, --shape, or --points --features --labels --avg-nnz --avg-labels');
  if (sources > 1) throw new UsageError('give one of: a data file, --shape, or the counts (--points ...)');
  if (countsGiven.length > 0 && countsGiven.length < COUNTS.length) {
    throw new UsageError(`the shape needs ${COUNTS.filter((k) => job[k] === undefined).map(flagName).join(', ')} too`);
  }
  if (job.avgNnz !== undefined && !(job.avgNnz > 0)) throw new UsageError(`option --avg-nnz must be > 0 but received ${job.avgNnz}`);
  if (job.avgLabels !== undefined && !(job.avgLabels > 0)) throw new UsageError(`option --avg-labels must be > 0 but received ${job.avgLabels}`);
  if (job.config !== undefined && job.hidden !== undefined) throw new UsageError('--hidden applies to the default network, not to a --config file');
}

async function dataShape(job: PlanJob, r: Reporter): Promise<{ shape: DataShape; source: string }> {
  if (job.data !== undefined) {
    r.say(`reading the shape of ${job.data}`);
    return { shape: await scanDataShape(job.data), source: job.data };
  }
  if (job.shape !== undefined) return { shape: shapeFromCounts(PLAN_SHAPES[job.shape]), source: job.shape };
  return {
    shape: shapeFromCounts({ points: job.points!, features: job.features!, labels: job.labels!, avgNnz: job.avgNnz!, avgLabels: job.avgLabels! }),
    source: 'the given counts',
  };
}
