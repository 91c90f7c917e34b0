// Learning online (src/network/online.ts, what `serve --learn` runs behind POST /learn) against retraining
// offline (`train --init`) on the same examples, on a real XC dataset (docs/serving.md "Learning online"):
//   1. a seeded `--fraction` of the labels is held out: they get the last label ids, and are removed from
//      every training point (a point left without labels is dropped); the base model trains on the rest
//      (`sublinear train`, the defaults);
//   2. for each N of `--ns`: the examples are, for every held-out label, its first N training points (a seeded
//      order; fewer when it has fewer), each with all of its labels; the same examples are
//        - learned online: OnlineLearner.learn on the base model, `--request` examples per call, and
//        - trained offline: `sublinear train --init base.sl --train examples.txt` (the defaults);
//   3. each model is scored on the test points that carry a held-out label: P@1 among the held-out labels
//      (the first held-out label of its top 100; none there counts as a miss), P@1 over all labels on those
//      points, and P@1 on the whole test set (what learning did to the rest).
//
//   npm run bench:learn -- --data <dir with train.txt and test.txt> [--fraction 0.1] [--ns 5,20,100] [--work dir] [--json]
//
// Without --work the files go to a temporary directory (removed at the end); with it, a base model already
// there is reused. Last stdout line: {"cpu", "data", "heldOutLabels", "base": {...}, "runs": [{n, examples, online, offline}]}.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { readXC } from '../src/datasets/xc-reader.js';
import { writeXC } from '../src/datasets/xc-writer.js';
import { sharedFloat32, sharedUint32, type SparseDataset } from '../src/datasets/csr.js';
import { Network } from '../src/network/network.js';
import { OnlineLearner, type OnlineOptions } from '../src/network/online.js';
import { createExecutor } from '../src/network/executor.js';
import { shuffleInPlace, Xoshiro128 } from '../src/util/rng.js';
import { packageRoot } from '../src/util/package-root.js';
import { defineCommand, UsageError } from '../src/cli/args.js';
import { benchMain } from './cli.js';

interface Args {
  data: string;
  fraction: number;
  ns: string;
  request: number;
  seed: number;
  work?: string;
  workers?: number;
  onlineOnly?: boolean;
  testPoints?: number;
  learner?: string;
  mode: 'auto' | 'exact' | 'sampled';
  json: boolean;
}

export const learnBenchCmd = defineCommand({
  name: 'bench:learn',
  summary: 'Online learning of held-out labels (OnlineLearner, POST /learn) against train --init on the same examples: P@1 on those labels.',
  flags: {
    data: { type: 'string', required: true, valueName: 'dir', description: 'directory holding train.txt and test.txt (XC format)' },
    fraction: { type: 'number', min: 0, default: 0.1, valueName: 'f', description: 'fraction of the labels held out of the base model' },
    ns: { type: 'string', default: '5,20,100', valueName: 'list', description: 'examples per held-out label' },
    request: { type: 'integer', min: 1, default: 16, valueName: 'n', description: 'examples per learn() call' },
    seed: { type: 'integer', min: 0, default: 1, valueName: 'n', description: 'seed of the held-out labels and the examples\' order' },
    work: { type: 'string', valueName: 'dir', description: 'keep the files here (a base model already there is reused)' },
    workers: { type: 'integer', min: 0, valueName: 'n', description: 'worker threads (default: number of cores)' },
    onlineOnly: { type: 'boolean', description: 'skip the offline train --init runs' },
    testPoints: { type: 'integer', min: 1, valueName: 'n', description: 'score on the first n test points only (default: all)' },
    learner: { type: 'string', valueName: 'json', description: 'OnlineOptions of the learner, e.g. {"lr": 0.05} (default: its defaults)' },
    mode: {
      type: 'choice', choices: ['exact', 'sampled', 'auto'] as const, default: 'exact',
      description: 'inference of the scoring (exact: what was learned, apart from the cluster index\'s recall)',
    },
    json: { type: 'boolean', description: 'print only the JSON line' },
  },
  run: async (o) => {
    await measure(o as Args);
    return 0;
  },
});

/** Runs `sublinear <args>`; resolves with its last stdout line parsed as JSON. */
function cli(args: string[]): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(packageRoot(), 'dist', 'src', 'cli.js'), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    child.stdout.on('data', (c: Buffer) => (out += c));
    child.stderr.on('data', (c: Buffer) => (err += c));
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`sublinear ${args.join(' ')} exited with ${code}: ${err.trim().slice(-1500)}`));
      resolve(JSON.parse(out.trim().split('\n').at(-1)!) as Record<string, unknown>);
    });
  });
}

/** Rows `rows` of `d` with labels mapped by `map` (-1: dropped); rows left without labels are dropped when `dropEmpty`. */
function remap(d: SparseDataset, rows: ArrayLike<number>, map: Int32Array, labels: number, dropEmpty: boolean): SparseDataset {
  const keep: number[] = [];
  const lab: number[][] = [];
  for (let t = 0; t < rows.length; t++) {
    const i = rows[t]!;
    const ls: number[] = [];
    for (let e = d.labelOffsets[i]!; e < d.labelOffsets[i + 1]!; e++) if (map[d.labelIndices[e]!]! >= 0) ls.push(map[d.labelIndices[e]!]!);
    if (dropEmpty && ls.length === 0) continue;
    keep.push(i);
    lab.push(ls.sort((a, b) => a - b));
  }
  let nnz = 0, lnnz = 0;
  keep.forEach((i, t) => {
    nnz += d.offsets[i + 1]! - d.offsets[i]!;
    lnnz += lab[t]!.length;
  });
  const offsets = sharedUint32(keep.length + 1), indices = sharedUint32(nnz), values = sharedFloat32(nnz);
  const labelOffsets = sharedUint32(keep.length + 1), labelIndices = sharedUint32(lnnz);
  let p = 0, q = 0;
  keep.forEach((i, t) => {
    for (let e = d.offsets[i]!; e < d.offsets[i + 1]!; e++, p++) {
      indices[p] = d.indices[e]!;
      values[p] = d.values[e]!;
    }
    offsets[t + 1] = p;
    for (const l of lab[t]!) labelIndices[q++] = l;
    labelOffsets[t + 1] = q;
  });
  return { points: keep.length, features: d.features, labels, offsets, indices, values, labelOffsets, labelIndices };
}

/** P@1 among labels >= `from` (first such label of the top 100), P@1 over all labels, on the points with such a label; and P@1 on all points. */
async function score(net: Network, test: SparseDataset, from: number, workers: number | undefined, mode: Args['mode']): Promise<{ heldOutP1: number; allLabelsP1: number; points: number; testP1: number; othersP1: number; othersTopHeldOut: number }> {
  const K = Math.min(100, net.config.layers.at(-1)!.size);
  const p = await net.predict(test, { k: K, workers, mode });
  let n = 0, hitH = 0, hitAll = 0, hitTest = 0, others = 0, hitOthers = 0, othersH = 0;
  for (let i = 0; i < test.points; i++) {
    const lo = test.labelOffsets[i]!, hi = test.labelOffsets[i + 1]!;
    const truth = new Set(Array.from(test.labelIndices.subarray(lo, hi)));
    const top = p.labels[i * K]!;
    if (truth.has(top)) hitTest++;
    if (![...truth].some((l) => l >= from)) {
      // A point of old labels only: is it still right, and is its top label a held-out one?
      others++;
      if (truth.has(top)) hitOthers++;
      if (top !== 0xffffffff && top >= from) othersH++;
      continue;
    }
    n++;
    if (truth.has(top)) hitAll++;
    for (let r = 0; r < K; r++) {
      const l = p.labels[i * K + r]!;
      if (l !== 0xffffffff && l >= from) {
        if (truth.has(l)) hitH++;
        break;
      }
    }
  }
  return { heldOutP1: hitH / n, allLabelsP1: hitAll / n, points: n, testP1: hitTest / test.points, othersP1: hitOthers / others, othersTopHeldOut: othersH / others };
}

async function measure(a: Args): Promise<void> {
  const log = (s: string) => {
    if (!a.json) process.stderr.write(s + '\n');
  };
  const ns = a.ns.split(',').map(Number);
  if (ns.some((n) => !Number.isInteger(n) || n < 1)) throw new UsageError(`Expected positive integers for --ns but received ${JSON.stringify(a.ns)}`);
  if (!(a.fraction > 0 && a.fraction < 1)) throw new UsageError(`Expected --fraction in (0, 1) but received ${a.fraction}`);
  const dir = a.work ?? (await mkdtemp(join(tmpdir(), 'sublinear-bench-learn-')));
  await mkdir(dir, { recursive: true });
  try {
    const train = await readXC(join(a.data, 'train.txt'));
    const test = await readXC(join(a.data, 'test.txt'));
    const L = Math.max(train.labels, test.labels);
    const order = Uint32Array.from({ length: L }, (_, i) => i);
    shuffleInPlace(order, new Xoshiro128(a.seed));
    const H = Math.round(a.fraction * L);
    const heldOut = new Set(Array.from(order.subarray(0, H)));
    // Kept labels first (in id order), held-out ones after them.
    const map = new Int32Array(L), baseMap = new Int32Array(L).fill(-1);
    let next = 0;
    for (let l = 0; l < L; l++) if (!heldOut.has(l)) baseMap[l] = map[l] = next++;
    for (let l = 0; l < L; l++) if (heldOut.has(l)) map[l] = next++;
    const from = L - H;
    const all = Uint32Array.from({ length: train.points }, (_, i) => i);
    const baseTrain = remap(train, all, baseMap, L - H, true);
    const testAll = remap(test, Uint32Array.from({ length: Math.min(test.points, a.testPoints ?? test.points) }, (_, i) => i), map, L, false);
    const basePath = join(dir, 'base.sl');
    const cpu = cpus()[0]?.model ?? 'unknown';
    let base: Record<string, unknown> = { reused: true };
    if (!existsSync(basePath)) {
      await writeXC(join(dir, 'base-train.txt'), baseTrain);
      log(`base model: ${baseTrain.points} training points, ${L - H} labels (${H} held out)`);
      const t0 = performance.now();
      base = await cli(['train', '--train', join(dir, 'base-train.txt'), '--save', basePath, '--quiet', '--json', ...(a.workers !== undefined ? ['--workers', String(a.workers)] : [])]);
      base = { seconds: (performance.now() - t0) / 1000, p1HeldOutData: base.p1 ?? null };
    }
    const baseNet = await Network.load(basePath);
    const baseScore = await score(baseNet, testAll, from, a.workers, a.mode);
    log(`base: ${JSON.stringify(baseScore)}`);
    // Each held-out label's training points, in a seeded order.
    const pointsOf = new Map<number, number[]>();
    for (let i = 0; i < train.points; i++) {
      for (let e = train.labelOffsets[i]!; e < train.labelOffsets[i + 1]!; e++) {
        const l = train.labelIndices[e]!;
        if (heldOut.has(l)) (pointsOf.get(l) ?? pointsOf.set(l, []).get(l)!).push(i);
      }
    }
    const rng = new Xoshiro128(a.seed + 1);
    const shuffled = new Map<number, Uint32Array>();
    for (const [l, list] of pointsOf) shuffled.set(l, shuffleInPlace(Uint32Array.from(list), rng));
    const runs = [];
    for (const n of ns) {
      const chosen = new Set<number>();
      let full = 0;
      for (const l of order.subarray(0, H)) {
        const list = shuffled.get(l) ?? new Uint32Array(0);
        if (list.length >= n) full++;
        for (const i of list.slice(0, n)) chosen.add(i);
      }
      const rows: Uint32Array = Uint32Array.from(chosen);
      shuffleInPlace(rows, new Xoshiro128(a.seed + 2));
      const stream = remap(train, rows, map, L, true);
      log(`N = ${n}: ${stream.points} examples (${full} of ${H} held-out labels have ${n} or more)`);
      // Online.
      const net = await Network.load(basePath);
      const exec = createExecutor(a.workers ?? cpus().length);
      const learner = new OnlineLearner(net, a.learner ? (JSON.parse(a.learner) as OnlineOptions) : {});
      const t0 = performance.now();
      try {
        for (let s = 0; s < stream.points; s += a.request) {
          const part = remap(stream, Uint32Array.from({ length: Math.min(a.request, stream.points - s) }, (_, i) => s + i), Int32Array.from({ length: L }, (_, i) => i), L, false);
          // A request names only the labels up to its largest (the network grows as far as it needs).
          let max = 0;
          for (const l of part.labelIndices) max = Math.max(max, l);
          await learner.learn({ ...part, labels: max + 1 }, { executor: exec });
        }
      } finally {
        await exec.close();
      }
      const onlineSeconds = (performance.now() - t0) / 1000;
      // Labels that no example named are still outputs of the offline model (the file declares L labels): grow to L for scoring alike.
      const onlineNet = learner.network.config.layers.at(-1)!.size < L ? learner.network.grow(L) : learner.network;
      const online = { ...(await score(onlineNet, testAll, from, a.workers, a.mode)), seconds: onlineSeconds, examplesPerSec: stream.points / onlineSeconds };
      log(`  online:  ${JSON.stringify(online)}`);
      if (a.onlineOnly) {
        runs.push({ n, examples: stream.points, labelsWithN: full, online });
        continue;
      }
      // Offline.
      const streamPath = join(dir, `examples-${n}.txt`), offPath = join(dir, `init-${n}.sl`);
      await writeXC(streamPath, stream);
      const t1 = performance.now();
      await cli(['train', '--init', basePath, '--train', streamPath, '--save', offPath, '--quiet', '--json', ...(a.workers !== undefined ? ['--workers', String(a.workers)] : [])]);
      const offline = { ...(await score(await Network.load(offPath), testAll, from, a.workers, a.mode)), seconds: (performance.now() - t1) / 1000 };
      log(`  offline: ${JSON.stringify(offline)}`);
      runs.push({ n, examples: stream.points, labelsWithN: full, online, offline });
    }
    const result = { cpu, data: a.data, mode: a.mode, labels: L, heldOutLabels: H, testPoints: testAll.points, learner: a.learner ? JSON.parse(a.learner) : {}, base: { ...base, ...baseScore }, runs };
    process.stdout.write(JSON.stringify(result) + '\n');
  } finally {
    if (!a.work) await rm(dir, { recursive: true, force: true });
  }
}

await benchMain(import.meta.url, learnBenchCmd, 'npm run bench:learn --');
