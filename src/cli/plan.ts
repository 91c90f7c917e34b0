// `sublinear plan`: the flags become a job for plan() (src/job/plan.ts: the plan of a training job before
// anything is allocated: the network the defaults build, memory per rank by part, predicted samples/s and
// epoch time of one process, replicated ranks and label-sharded ranks, and the configuration it would choose);
// this prints the plan as a table, or (--json) as one JSON object.
import { plan } from '../job/plan.js';
import { formatBytes, parseBytes } from '../network/memory-plan.js';
import { formatParts, formatPlanLine, formatSeconds, networkLine, PLAN_SHAPES, type PlanCandidate, type PlanMode, type TrainingPlan } from '../train/plan.js';
import { defineCommand, UsageError, type CliIO, type ParsedOptions } from './args.js';
import { jobEvents } from './engine.js';

const SHAPE_NAMES = Object.keys(PLAN_SHAPES) as (keyof typeof PLAN_SHAPES)[];

/** A comma-separated list of positive numbers (`10,25,100`); a bad one is a usage error naming the flag. */
export function parseList(text: string, flag: string, integer: boolean, sort = true): number[] {
  const items = text.split(',').map((s) => s.trim());
  const out = items.map((s) => (/^\d+(\.\d+)?$/.test(s) ? Number(s) : NaN));
  if (items.length === 0 || out.some((v) => !(v > 0) || (integer && !Number.isSafeInteger(v)))) {
    throw new UsageError(`option --${flag} expects a comma-separated list of positive ${integer ? 'integers' : 'numbers'} but received '${text}'`);
  }
  const unique = [...new Set(out)];
  return sort ? unique.sort((a, b) => a - b) : unique;
}

const planFlags = {
  shape: { type: 'choice', choices: SHAPE_NAMES, description: 'a known shape instead of a data file' },
  points: { type: 'integer', min: 1, valueName: 'n', description: 'training points (with --features --labels --avg-nnz --avg-labels, instead of a data file)' },
  features: { type: 'integer', min: 1, valueName: 'n', description: 'feature dimension' },
  labels: { type: 'integer', min: 1, valueName: 'n', description: 'number of labels' },
  avgNnz: { type: 'number', min: 0, valueName: 'x', description: 'mean nonzero features per point' },
  avgLabels: { type: 'number', min: 0, valueName: 'x', description: 'mean labels per point' },
  config: { type: 'string', valueName: 'json', description: 'network and training options as train --config takes them (default: the defaults rule)' },
  hidden: { type: 'integer', min: 1, valueName: 'n', description: 'width of the default network\'s hidden layer (default: the defaults rule)' },
  batch: { type: 'integer', min: 1, valueName: 'n', description: 'global batch (default 128, or the --config file\'s batchSize)' },
  epochs: { type: 'integer', min: 1, valueName: 'n', description: 'a fixed number of epochs, as train --epochs (then no copy of the best epoch\'s weights is kept); default: held-out early stopping' },
  workers: { type: 'integer', min: 1, max: 256, valueName: 'n', description: 'worker threads per rank (default: the defaults rule: the cores per rank with a sampled output layer, else 1)' },
  threads: { type: 'integer', min: 1, max: 256, valueName: 'n', description: 'one process: threads sharing each batch (default: the defaults rule: the cores with a dense output layer and one worker, else 1)' },
  cores: { type: 'integer', min: 1, valueName: 'n', description: 'cores per machine (default: this machine\'s)' },
  memory: { type: 'string', valueName: 'bytes', description: 'memory per machine, e.g. 24GB; the plan keeps 90% (default: this machine\'s)' },
  ranksPerMachine: { type: 'integer', min: 1, valueName: 'n', description: 'ranks started on each machine: they share its cores and memory (default 1)' },
  linkGbps: { type: 'string', valueName: 'list', description: 'link speeds in Gb/s, e.g. 10,25,100; the first is used to choose (default: 10)' },
  latencyUs: { type: 'number', min: 0, default: 20, valueName: 'us', description: 'latency of one message' },
  ranks: { type: 'string', valueName: 'list', description: 'rank counts to consider, e.g. 8,16,32,64 (default: 1, or powers of two up to --max-ranks)' },
  maxRanks: { type: 'integer', min: 1, valueName: 'n', description: 'consider 1, 2, 4, ... up to n ranks' },
  modes: { type: 'string', valueName: 'list', description: 'modes to consider: single, replicated, sharded (default: all)' },
  recalibrate: { type: 'boolean', description: 'run the timing probe even when a cached calibration exists' },
  calibration: { type: 'string', valueName: 'file', description: 'calibration cache file (default: $SUBLINEAR_CACHE_DIR or ~/.cache/sublinear, calibration.json)' },
  json: { type: 'boolean', description: 'print the plan as one JSON object (the last stdout line)' },
  quiet: { type: 'boolean', short: 'q', description: 'no progress on stderr' },
} as const;
const planPositionals = [{ name: 'data', description: 'training data (XC format with its header)', required: false }] as const;

export const planCmd = defineCommand({
  name: 'plan',
  summary: 'Plan a training job before it runs: network, memory per rank, predicted samples/s, the configuration to use.',
  description:
    'Reads only the data file\'s shape and label and feature frequencies (one streaming pass; XC format), or takes the shape from ' +
    '--shape or --points --features --labels --avg-nnz --avg-labels. The speed model is measured: a probe (a few seconds to a minute) times the real ' +
    'kernels on a network of the planned widths on this machine (cached per CPU and widths; --recalibrate measures again). ' +
    'Modes: one process (W workers), label-sharded ranks (train --distributed, one thread per rank: each rank owns 1/R of the output ' +
    'labels (rows, moments, wide pairs) and 1/R of the input features\' rows of the first layer; every rank runs each step on the whole ' +
    'batch; rank 0 also holds one round of the model file while saving) and replicated ranks (train --distributed --data-parallel: every ' +
    'rank holds the whole network). With a data file the wide part\'s pairs per sample are measured on its first points; from a shape or ' +
    'counts they are assumed spread evenly over the features (said in the plan).',
  positionals: planPositionals,
  flags: planFlags,
  examples: [
    'plan train.txt',
    'plan train.txt --ranks 1,2 --link-gbps 10 --json',
    'plan --shape amazon-3m --hidden 1024 --ranks 8,16,32,64 --link-gbps 10,25,100',
  ],
  run: async (o, io) => planCommand(o, io),
});

type PlanOptions = ParsedOptions<typeof planFlags, typeof planPositionals>;

async function planCommand(o: PlanOptions, io: CliIO): Promise<number> {
  if (o.ranks !== undefined && o.maxRanks !== undefined) throw new UsageError('give --ranks or --max-ranks, not both');
  const { linkGbps, ranks, maxRanks, modes, memory, json, ...job } = o;
  const { plan: p, source, cached, cacheFile } = await plan({
    ...job,
    linkGbps: linkGbps !== undefined ? parseList(linkGbps, 'link-gbps', false, false) : undefined,
    ranks: ranks !== undefined ? parseList(ranks, 'ranks', true) : maxRanks !== undefined ? powersOfTwo(maxRanks) : undefined,
    modes: modes !== undefined ? parseModes(modes) : undefined,
    memoryBytes: memory !== undefined ? bytesFlag(memory, '--memory') : undefined,
    ...jobEvents(io),
  });
  io.out(json ? JSON.stringify(planJson(p, source, cached, cacheFile)) + '\n' : planText(p, source, cached));
  return 0;
}

/** --modes: a comma-separated list of single, replicated, sharded. */
function parseModes(text: string): PlanMode[] {
  const m = text.split(',').map((s) => s.trim());
  const bad = m.find((x) => !['single', 'replicated', 'sharded'].includes(x));
  if (bad !== undefined) throw new UsageError(`option --modes expects single, replicated or sharded but received '${bad}'`);
  return m as PlanMode[];
}

/** A size flag in bytes; a malformed one is a usage error. */
function bytesFlag(text: string, flag: string): number {
  try {
    return parseBytes(text, flag);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

function powersOfTwo(max: number): number[] {
  const out: number[] = [];
  for (let r = 1; r <= max; r *= 2) out.push(r);
  return out;
}

/** The plan as JSON: everything but the data's frequency arrays. */
export function planJson(p: TrainingPlan, source: string, cached: boolean, cacheFile: string): unknown {
  const cand = (c: PlanCandidate) => ({
    mode: c.mode, ranks: c.ranks, workers: c.workers, threads: c.threads, batch: c.batch, linkGbps: c.linkGbps, fits: c.fits, ...(c.excluded ? { excluded: c.excluded } : {}),
    memoryPerRankBytes: c.memoryPerRank.totalBytes, memoryParts: c.memoryPerRank.parts, peakRssBytes: c.peakRssBytes,
    samplesPerSec: c.samplesPerSec, epochSeconds: c.epochSeconds,
    stepSeconds: { lower: c.step.lower, output: c.step.output, wide: c.step.wide, overhead: c.step.overhead, apply: c.step.apply, rebuild: c.step.rebuild, exchange: c.step.exchange, wait: c.step.wait, total: c.step.total },
    receivedBytesPerStep: c.step.receivedBytes, exchangedBytesPerStep: c.step.exchangedBytes, collectives: c.step.collectives,
  });
  return {
    source, shape: p.shape, network: networkLine(p.config), config: p.config, workload: p.workload, machine: p.machine,
    calibration: { ...p.calibration, cached, file: cacheFile },
    chosen: cand(p.chosen), reason: p.reason, line: formatPlanLine(p), candidates: p.candidates.map(cand),
  };
}

function planText(p: TrainingPlan, source: string, cached: boolean): string {
  const n = (x: number, d = 0) => x.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
  const c = p.calibration, w = p.workload, m = p.machine;
  const lines: string[] = [];
  lines.push(`data: ${source}: ${n(p.shape.points)} points, ${n(p.shape.features)} features, ${n(p.shape.labels)} labels, ${n(p.shape.avgNnz, 1)} nonzeros and ${n(p.shape.avgLabels, 2)} labels per point`);
  lines.push(`network: ${networkLine(p.config)}`);
  lines.push(`machines: ${m.cores} cores, ${formatBytes(m.memoryBytes)} each; links ${[...new Set(p.candidates.map((x) => x.linkGbps))].join(', ')} Gb/s, ${n(m.latency * 1e6)} us latency`);
  lines.push(`measured on ${c.cpu}${cached ? ' (cached)' : ''}: lower ${n(c.lowerPerMac * 1e9, 3)} ns/MAC, output ${n(c.outputPerMac * 1e9, 3)} ns/MAC, ` +
    `wide ${n(c.widePerPair * 1e9, 1)} ns/pair, ${n(c.perSample * 1e6, 1)} us/sample, apply ${n(c.applyPerFloat * 1e9, 2)} ns/float, ` +
    `rebuild ${n(c.rebuildPerRowTable * 1e9, 1)} ns/(row x table) + ${n(c.rebuildPerBucket * 1e9, 2)} ns/bucket, ${c.parallelWorkers} workers at ${n(100 * c.parallelEfficiency)}% each, ` +
    (c.threadSpeedup !== undefined ? `1 worker with ${c.parallelWorkers} threads per batch ${n(c.threadSpeedup, 2)}x one, ` : '') +
    `label-sharded rank: lower ${n(c.shard.lowerPerMac * 1e9, 3)} ns/MAC + ${n(c.shard.lowerPerSample * 1e6, 1)} us/sample, ` +
    `output ${n(c.shard.outputPerMac * 1e9, 3)} ns/MAC, wide ${n(c.shard.widePerPair * 1e9, 1)} ns/pair, ${n(c.shard.perSample * 1e6, 1)} us/sample, ` +
    `spread ${n(c.shard.spreadPerSample * 1e6, 2)} us/sample, ${n(c.shard.coLocated ?? 1, 2)}x beside another rank`);
  lines.push(`per sample: ${n(w.lowerMacs)} MACs below the output, ${n(w.active)} active outputs x ${p.config.layers.length > 1 ? p.config.layers.at(-2)!.size : p.config.inputDim} = ${n(w.outputMacs)} MACs, ` +
    `${n(w.widePairs)} wide pairs${w.widePairsFrom === 'measured' ? ' (measured on the data\'s first points)' : w.widePairsFrom === 'assumed' ? ' (assumed spread evenly over the features: give the data file to measure them)' : ''}; ` +
    `${n(w.rebuildsPerStep, 4)} rebuilds per step`);
  lines.push('');
  // One row per mode and rank count; samples/s per link speed; the step's terms at the first link.
  const links = [...new Set(p.candidates.map((x) => x.linkGbps))];
  lines.push(`| mode | ranks | workers | memory per rank | received per rank per step | step ms at ${links[0]} Gb/s (lower / output / wide / other / apply / rebuild / exchange / wait) | ${links.map((l, i) => `${i === 0 ? 'samples/s at ' : ''}${l} Gb/s`).join(' | ')} |`);
  lines.push(`|---|---|---|---|---|---|${links.map(() => '---').join('|')}|`);
  const groups = new Map<string, PlanCandidate[]>();
  for (const x of p.candidates) {
    const k = `${x.mode} ${x.ranks}`;
    groups.set(k, [...(groups.get(k) ?? []), x]);
  }
  for (const g of groups.values()) {
    const x = g[0]!, s = x.step, ms = (v: number) => (v * 1000).toFixed(v * 1000 < 10 ? 2 : 1);
    const sps = links.map((l) => g.find((y) => y.linkGbps === l) ?? x).map((y) => n(y.samplesPerSec));
    lines.push(`| ${x.mode} | ${x.ranks} | ${x.workers}${x.threads > 1 ? ` (x ${x.threads} threads)` : ''} | ${formatBytes(x.memoryPerRank.totalBytes)}${x.excluded ? ' (excluded)' : ''} | ${formatBytes(s.receivedBytes)} | ` +
      `${ms(s.total)} (${[s.lower, s.output, s.wide, s.overhead, s.apply, s.rebuild, s.exchange, s.wait].map(ms).join(' / ')}) | ${sps.join(' | ')} |`);
  }
  lines.push('');
  const excluded = new Map<string, string[]>();
  for (const x of p.candidates.filter((y) => y.excluded)) excluded.set(`${x.mode}: ${x.excluded}`, [...new Set([...(excluded.get(`${x.mode}: ${x.excluded}`) ?? []), String(x.ranks)])]);
  for (const [what, ranks] of excluded) lines.push(`excluded: ${what.replace(': ', ` x ${ranks.join(', ')}: `)}`);
  lines.push(`epoch of ${n(p.shape.points)} points: ${formatSeconds(p.chosen.epochSeconds)} (chosen configuration)`);
  lines.push(`memory per ${p.chosen.mode === 'single' ? 'process' : 'rank'}: ${formatBytes(p.chosen.memoryPerRank.totalBytes)} (${formatParts(p.chosen.memoryPerRank.parts)})`);
  lines.push(`chosen: ${p.reason}`);
  lines.push(formatPlanLine(p));
  return lines.join('\n') + '\n';
}
