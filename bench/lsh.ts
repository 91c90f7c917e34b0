// LSH benchmark at SLIDE's Amazon-670K output-layer scale: table build time, query throughput, candidate-set
// size and recall@10 against the exact top-10 inner products, for SimHash and DWTA, compared with a
// brute-force top-10 scan run in the same process.
//
//   node dist/bench/lsh.js [--json] [--neurons n] [--dim d] [--K k] [--L l] [--queries q] [--budget b] [--seed s]
//
// Data (why it has structure): label embeddings of extreme classification are not isotropic noise; similar
// labels form groups. We draw `neurons / 32` cluster centres c ~ N(0, I_d); each neuron is c + 0.6 * g (g ~
// N(0, I_d)) for a random centre, and each query is a noisy copy of a random neuron (neuron + 0.6 * g). The
// exact top-10 of a query are then mostly its source's cluster-mates - a real nearest-neighbour structure for
// LSH to find - while the inner products still have to be computed to rank them (norms vary).
//
// Timing, all single-threaded in one process:
// - build: hashing every neuron in all L tables + counting-sort rebuild (one lshRehash call);
// - LSH query time = hashing the queries + the candidate query (lshQuery) + exact inner products over the
//   candidates and top-10 selection (lshInnerTopK with candidate lists): everything an LSH layer pays;
// - brute force = lshInnerTopK over all neurons (8 queries share each pass over the weight matrix, AVX2 /
//   AVX-512 dot products), the same kernel the LSH path uses for its candidates.
// speedupVsBruteForce = brute-force seconds per query / LSH seconds per query.
import { native } from '../src/native.js';
import { LshIndex, type LshFamily, type LshQueryOptions } from '../src/lsh/index.js';
import { Xoshiro128 } from '../src/util/rng.js';

interface Args {
  json: boolean;
  neurons: number;
  dim: number;
  K: number;
  L: number;
  queries: number;
  budget: number;
  seed: number;
}

function parseArgs(argv: string[]): Args {
  const a: Args = { json: false, neurons: 670_091, dim: 128, K: 6, L: 50, queries: 1000, budget: 0, seed: 1 };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    if (flag === '--json') {
      a.json = true;
      continue;
    }
    const key = flag.replace(/^--/, '') as keyof Args;
    if (!(key in a) || key === 'json') throw new Error(`Unknown option ${flag}`);
    const v = Number(argv[++i]);
    if (!Number.isInteger(v) || v < 0) throw new Error(`Expected non-negative integer for ${flag} but received ${argv[i]}`);
    (a[key] as number) = v;
  }
  if (a.neurons < 64 || a.dim < 8 || a.K < 1 || a.L < 1 || a.queries < 1) throw new Error('neurons >= 64, dim >= 8, K, L, queries >= 1');
  return a;
}

function makeData(a: Args): { neurons: Float32Array; queries: Float32Array } {
  const rng = new Xoshiro128(a.seed);
  const { dim } = a;
  const nc = Math.max(1, Math.floor(a.neurons / 32));
  const centres = new Float32Array(nc * dim);
  for (let i = 0; i < centres.length; i++) centres[i] = rng.normal();
  const neurons = new Float32Array(a.neurons * dim);
  for (let n = 0; n < a.neurons; n++) {
    const c = rng.below(nc) * dim;
    for (let d = 0; d < dim; d++) neurons[n * dim + d] = centres[c + d]! + 0.6 * rng.normal();
  }
  const queries = new Float32Array(a.queries * dim);
  for (let q = 0; q < a.queries; q++) {
    const src = rng.below(a.neurons) * dim;
    for (let d = 0; d < dim; d++) queries[q * dim + d] = neurons[src + d]! + 0.6 * rng.normal();
  }
  return { neurons, queries };
}

function seconds(t0: bigint): number {
  return Number(process.hrtime.bigint() - t0) / 1e9;
}

interface RunResult {
  family: LshFamily;
  K: number;
  L: number;
  neurons: number;
  dim: number;
  rangeBits: number;
  queries: number;
  mode: string;
  budget: number | null;
  buildSeconds: number;
  tablesMB: number;
  hashSecondsPerQuery: number;
  querySecondsPerQuery: number;
  scoreSecondsPerQuery: number;
  queriesPerSec: number;
  avgCandidates: number;
  recallAt10: number;
  bruteForceSecondsPerQuery: number;
  speedupVsBruteForce: number;
}

function run(
  a: Args,
  family: LshFamily,
  K: number,
  data: { neurons: Float32Array; queries: Float32Array },
  exact: Uint32Array,
  bruteSecPerQuery: number,
  qopts: LshQueryOptions,
): RunResult {
  const { dim, neurons: N, queries: q, L } = a;
  const index = new LshIndex({ family, K, L, dim, seed: a.seed + 17 });
  let t = process.hrtime.bigint();
  index.build(data.neurons, N);
  const buildSeconds = seconds(t);

  const addon = native();
  // Warm-up (page faults of the output buffers and scratch).
  index.query(data.queries.subarray(0, Math.min(q, 16) * dim), Math.min(q, 16), qopts);

  t = process.hrtime.bigint();
  const keys = index.hash(data.queries, q);
  const hashSec = seconds(t);
  t = process.hrtime.bigint();
  const cands = index.queryKeys(keys, q, { ...qopts, seed: 5 });
  const querySec = seconds(t);
  const outIdx = new Uint32Array(q * 10);
  const outVal = new Float32Array(q * 10);
  t = process.hrtime.bigint();
  addon.lshInnerTopK(data.neurons, N, dim, data.queries, q, cands.offsets, cands.ids, 10, outIdx, outVal);
  const scoreSec = seconds(t);

  let hits = 0;
  for (let i = 0; i < q; i++) {
    const truth = new Set(exact.subarray(i * 10, i * 10 + 10));
    for (let j = 0; j < 10; j++) if (truth.has(outIdx[i * 10 + j]!)) hits++;
  }
  const lshSecPerQuery = (hashSec + querySec + scoreSec) / q;
  const tables = index.tables!;
  return {
    family,
    K,
    L,
    neurons: N,
    dim,
    rangeBits: index.options.rangeBits,
    queries: q,
    mode: qopts.mode ?? 'union',
    budget: qopts.budget === undefined ? null : qopts.budget,
    buildSeconds: round(buildSeconds, 3),
    tablesMB: round(index.memoryBytes() / 1e6, 1),
    hashSecondsPerQuery: hashSec / q,
    querySecondsPerQuery: querySec / q,
    scoreSecondsPerQuery: scoreSec / q,
    queriesPerSec: round(1 / lshSecPerQuery, 1),
    avgCandidates: round(cands.ids.length / q, 1),
    recallAt10: round(hits / (10 * q), 4),
    bruteForceSecondsPerQuery: bruteSecPerQuery,
    speedupVsBruteForce: round(bruteSecPerQuery / lshSecPerQuery, 2),
    ...(tables ? {} : {}),
  };
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

function main(): void {
  const a = parseArgs(process.argv.slice(2));
  const log = (s: string): void => {
    if (!a.json) console.log(s);
    else console.error(s);
  };
  const addon = native();
  log(`lsh bench: ${a.neurons} neurons x ${a.dim} dims, ${a.queries} queries, L = ${a.L} (cpu: ${JSON.stringify(addon.cpuFeatures())})`);
  let t = process.hrtime.bigint();
  const data = makeData(a);
  log(`data: ${seconds(t).toFixed(2)} s`);

  t = process.hrtime.bigint();
  const exact = new Uint32Array(a.queries * 10);
  addon.lshInnerTopK(data.neurons, a.neurons, a.dim, data.queries, a.queries, null, null, 10, exact, new Float32Array(a.queries * 10));
  const brute = seconds(t) / a.queries;
  log(`brute force top-10: ${(brute * 1e3).toFixed(3)} ms/query`);

  const qopts: LshQueryOptions = a.budget > 0 ? { mode: 'topk', budget: a.budget } : { mode: 'union' };
  const results: RunResult[] = [];
  for (const [family, K] of [
    ['simhash', 18],
    ['dwta', a.K],
  ] as [LshFamily, number][]) {
    const r = run(a, family, K, data, exact, brute, qopts);
    results.push(r);
    log(
      `${family.padEnd(8)} K=${K} L=${a.L} rangeBits=${r.rangeBits}: build ${r.buildSeconds.toFixed(2)} s, tables ${r.tablesMB} MB, ` +
        `${r.queriesPerSec.toFixed(0)} queries/s (hash ${(r.hashSecondsPerQuery * 1e6).toFixed(1)} us + query ${(r.querySecondsPerQuery * 1e6).toFixed(1)} us + score ${(r.scoreSecondsPerQuery * 1e6).toFixed(1)} us), ` +
        `${r.avgCandidates} candidates, recall@10 ${r.recallAt10.toFixed(3)}, speedup ${r.speedupVsBruteForce.toFixed(1)}x`,
    );
  }
  if (a.json) {
    for (const r of results.slice(0, -1)) console.log(JSON.stringify(r));
    console.log(JSON.stringify(results[results.length - 1]));
  }
}

main();
