// A second synthetic data model, "taxonomy", built on different assumptions from `synth.ts`, so that a
// method tuned to one generator shows itself on the other.
//
// What `synth.ts` (the "prototype" model) assumes:
// - labels are independent: a point's labels are drawn one by one from a single Zipf popularity, so which
//   labels occur together carries no information;
// - every label owns its own 10-30 feature ids, drawn uniformly from the whole vocabulary, so two labels
//   share evidence only by chance, and 80% of a point's feature draws come from its labels' own words;
// - idf is a fixed function of a word's background rank, not measured on documents.
//
// What this model assumes instead (closer to text tagged with a category tree: product categories,
// Wikipedia categories, Debian tags):
// - labels are the leaves of a three-level taxonomy (topic > group > label). Popularity is a product of
//   Zipf laws down the tree, so it is a power law with hierarchical structure, and co-occurrence is
//   correlated: a point has 1 + Geometric "aspects"; each picks a topic, then a group of that topic, then
//   1 + Geometric sibling labels of that group, and sometimes a label of another group of the same topic;
// - evidence is shared along the tree: each topic has a Zipfian vocabulary, each group a vocabulary half
//   taken from its topic's, each label only 2-12 words of its own, half taken from its group's. Siblings
//   therefore share most of their words, and words are reused across unrelated topics (polysemy);
// - a document is a mixture of background, topic, group and label words with proportions that vary from
//   document to document (Gamma noise around `mix`): on average only `mix.label` (15%) of the tokens are a
//   label's own words, the rest tell the topic and group, or nothing;
// - document lengths are log-normal in tokens (not distinct features), so long documents repeat words;
// - values are real tf-idf: (1 + ln tf) * idf with idf = ln((1 + N) / (1 + df)) + 1 measured on a pilot
//   corpus of N documents drawn from a separate stream of the same model, then L2-normalised and rounded to
//   4 significant digits as in `synth.ts`;
// - with many labels most of them are rare: at the `200k` shape the majority of the labels that occur in
//   100,000 training points have 1-5 of them, and many test labels never occur in training.
// Points come from one stream (train, then test) exactly as in `synth.ts`.
import { SplitMix64, Xoshiro128, shuffleInPlace } from '../util/rng.js';
import type { SparseDataset } from './csr.js';
import {
  checkCount, checkSeed, collectPoints, identity, round4, sampleCdf, writePointStream, zipfCdf, type PointScratch,
} from './synth.js';

/** Parameters of the taxonomy model's distribution. */
export interface TaxonomyShape {
  /** Vocabulary (feature dimension) D. */
  features: number;
  /** Number of labels L (the leaves of the taxonomy). */
  labels: number;
  /** Mean number of labels in a group (sizes are 1 + Geometric, at most 10x the mean). */
  groupSize: number;
  /** Mean number of groups in a topic (likewise). */
  groupsPerTopic: number;
  /** Mean number of aspects (topic, group) per point (>= 1; 1 + Geometric). */
  avgAspects: number;
  /** Mean number of labels an aspect takes from its group (>= 1; 1 + Geometric). */
  labelsPerAspect: number;
  /** Probability that an aspect also takes one label from another group of its topic. */
  crossGroup: number;
  /** Mean number of tokens per point (log-normal, sigma 0.6); distinct features are fewer. */
  avgTokens: number;
  /** Words in a topic's vocabulary, and in a group's (half of them taken from its topic's). */
  topicWords: number;
  groupWords: number;
  /** Range of a label's own vocabulary size (inclusive; half of the words taken from its group's). */
  labelWordsMin: number;
  labelWordsMax: number;
  /** Zipf exponents s of P(rank r) proportional to (r + q)^-s: topics, groups in a topic, labels in a group. */
  topicZipf: { s: number; q: number };
  groupZipf: { s: number; q: number };
  labelZipf: { s: number; q: number };
  /** Zipf law of words within every topic, group and label vocabulary. */
  wordZipf: { s: number; q: number };
  /** Zipf law of the background words over the whole vocabulary. */
  backgroundZipf: { s: number; q: number };
  /** Mean shares of a point's tokens: background, topic, group and label words (they sum to 1). */
  mix: { background: number; topic: number; group: number; label: number };
  /** Integer shape k of the Gamma(k) noise on each share per point (smaller: shares vary more). */
  mixShape: number;
  /** Documents in the pilot corpus that measures document frequencies for idf. */
  idfPilot: number;
}

const COMMON = {
  avgAspects: 1.4, labelsPerAspect: 1.8, crossGroup: 0.25,
  labelWordsMin: 2, labelWordsMax: 12,
  wordZipf: { s: 1, q: 2 }, backgroundZipf: { s: 1.05, q: 5 },
  mix: { background: 0.4, topic: 0.28, group: 0.17, label: 0.15 }, mixShape: 2,
} as const;

/** Shapes of the taxonomy model. */
export const TAXONOMY_SHAPES = {
  /** For unit tests: 2,000 features, 200 labels, ~25 tokens per point. */
  tiny: {
    ...COMMON, features: 2000, labels: 200, groupSize: 5, groupsPerTopic: 4, avgTokens: 25,
    topicWords: 60, groupWords: 20, topicZipf: { s: 1, q: 2 }, groupZipf: { s: 1, q: 1 }, labelZipf: { s: 1, q: 1 },
    idfPilot: 500,
  },
  /** For quick experiments: 20,000 features, 5,000 labels, ~80 tokens per point. */
  small: {
    ...COMMON, features: 20000, labels: 5000, groupSize: 6, groupsPerTopic: 10, avgTokens: 80,
    topicWords: 200, groupWords: 40, topicZipf: { s: 1, q: 5 }, groupZipf: { s: 1, q: 2 }, labelZipf: { s: 1, q: 1 },
    idfPilot: 5000,
  },
  /** 100,000 features, 200,000 labels, ~110 tokens per point: the large held-out-style shape. */
  '200k': {
    ...COMMON, features: 100000, labels: 200000, groupSize: 8, groupsPerTopic: 25, avgTokens: 110,
    topicWords: 300, groupWords: 60, topicZipf: { s: 0.7, q: 10 }, groupZipf: { s: 0.7, q: 2 }, labelZipf: { s: 0.8, q: 1 },
    idfPilot: 20000,
  },
} as const satisfies Record<string, TaxonomyShape>;

export type TaxonomyShapeName = keyof typeof TAXONOMY_SHAPES;
export const TAXONOMY_SHAPE_NAMES = Object.keys(TAXONOMY_SHAPES) as TaxonomyShapeName[];

/** Resolves a shape name (throws listing the known names) or validates a custom shape. */
export function resolveTaxonomyShape(shape: TaxonomyShapeName | TaxonomyShape): TaxonomyShape {
  if (typeof shape === 'string') {
    const s = (TAXONOMY_SHAPES as Record<string, TaxonomyShape>)[shape];
    if (!s) throw new Error(`Unknown taxonomy shape '${shape}' (known: ${TAXONOMY_SHAPE_NAMES.join(', ')})`);
    return s;
  }
  const int = (name: keyof TaxonomyShape, v: number): void => {
    if (!(Number.isInteger(v) && v > 0)) throw new Error(`Expected positive integer for shape.${name} but received ${v}`);
  };
  for (const k of ['features', 'labels', 'topicWords', 'groupWords', 'labelWordsMin', 'labelWordsMax', 'mixShape', 'idfPilot'] as const) int(k, shape[k]);
  for (const k of ['groupSize', 'groupsPerTopic', 'avgAspects', 'labelsPerAspect'] as const) {
    if (!(shape[k] >= 1 && Number.isFinite(shape[k]))) throw new Error(`Expected shape.${k} >= 1 but received ${shape[k]}`);
  }
  if (!(shape.avgTokens > 0 && Number.isFinite(shape.avgTokens))) throw new Error(`Expected positive number for shape.avgTokens but received ${shape.avgTokens}`);
  if (!(shape.crossGroup >= 0 && shape.crossGroup <= 1)) throw new Error(`Expected shape.crossGroup in [0, 1] but received ${shape.crossGroup}`);
  if (shape.labelWordsMax < shape.labelWordsMin) {
    throw new Error(`Expected labelWordsMin <= labelWordsMax but received ${shape.labelWordsMin}, ${shape.labelWordsMax}`);
  }
  if (Math.max(shape.topicWords, shape.groupWords, shape.labelWordsMax) > shape.features) {
    throw new Error(`Expected every vocabulary to fit in shape.features (${shape.features})`);
  }
  const m = shape.mix;
  const parts = [m.background, m.topic, m.group, m.label];
  if (!parts.every((x) => x >= 0 && Number.isFinite(x)) || Math.abs(parts.reduce((a, b) => a + b, 0) - 1) > 1e-9) {
    throw new Error(`Expected shape.mix shares >= 0 summing to 1 but received ${parts.join(', ')}`);
  }
  return shape;
}

/** 1 + Geometric with the given mean (>= 1), at most `cap`. */
function onePlusGeometric(rng: Xoshiro128, mean: number, cap: number): number {
  if (mean <= 1) return 1;
  const p = 1 / mean;
  return Math.min(cap, 1 + Math.floor(Math.log(1 - rng.nextFloat()) / Math.log(1 - p)));
}

/** Cuts n items into consecutive runs of 1 + Geometric(mean) items; returns the run starts plus n. */
function cutRuns(n: number, mean: number, rng: Xoshiro128): Uint32Array {
  const starts: number[] = [0];
  let at = 0;
  while (at < n) {
    at = Math.min(n, at + onePlusGeometric(rng, mean, Math.ceil(10 * mean)));
    starts.push(at);
  }
  return Uint32Array.from(starts);
}

/** Distinct words: `fromParent` drawn from `parent` (without repetition), the rest uniform from [0, D). */
function drawVocabulary(size: number, parent: Uint32Array | null, fromParent: number, D: number, rng: Xoshiro128): Uint32Array {
  const out = new Uint32Array(size);
  let k = 0;
  const has = (f: number) => {
    for (let i = 0; i < k; i++) if (out[i] === f) return true;
    return false;
  };
  if (parent) {
    const take = Math.min(fromParent, parent.length);
    for (let tries = 0; k < take && tries < 20 * take; tries++) {
      const f = parent[rng.below(parent.length)]!;
      if (!has(f)) out[k++] = f;
    }
  }
  while (k < size) {
    const f = rng.below(D);
    if (!has(f)) out[k++] = f;
  }
  return out;
}

/** The seeded taxonomy distribution: tables built once, then points drawn one at a time. */
export class TaxonomyModel {
  readonly shape: TaxonomyShape;
  /** Number of topics and groups the seed produced. */
  readonly topics: number;
  readonly groups: number;
  // Label ids in taxonomy order: group g holds labelOrder[groupStart[g] .. groupStart[g + 1]).
  private readonly labelOrder: Uint32Array;
  private readonly groupStart: Uint32Array;
  // Topic t holds groups topicStart[t] .. topicStart[t + 1].
  private readonly topicStart: Uint32Array;
  private readonly topicPerm: Uint32Array;
  private readonly topicCdf: Float64Array;
  private readonly cdfBySize = new Map<string, Float64Array>();
  private readonly topicVocab: Uint32Array[];
  private readonly groupVocab: Uint32Array[];
  private readonly labelVocab: Uint32Array[];
  private readonly backgroundPerm: Uint32Array;
  private readonly backgroundCdf: Float64Array;
  private readonly idf: Float32Array;
  private readonly labelMark: Uint8Array;
  private readonly tf: Float32Array;
  private rng: Xoshiro128;
  private readonly pointRng: Xoshiro128;
  private scratch: PointScratch;
  private weights: Float64Array;
  private aspectTopic = new Uint32Array(16);
  private aspectGroup = new Uint32Array(16);

  constructor(shape: TaxonomyShapeName | TaxonomyShape, seed: number) {
    const sh = resolveTaxonomyShape(shape);
    checkSeed(seed);
    this.shape = sh;
    const sm = new SplitMix64(seed);
    const modelRng = new Xoshiro128(sm.next());
    this.pointRng = new Xoshiro128(sm.next());
    const pilotRng = new Xoshiro128(sm.next());
    const D = sh.features, L = sh.labels;

    // The tree: labels in a seeded order cut into groups, groups cut into topics.
    this.labelOrder = shuffleInPlace(identity(L), modelRng);
    this.groupStart = cutRuns(L, sh.groupSize, modelRng);
    this.groups = this.groupStart.length - 1;
    this.topicStart = cutRuns(this.groups, sh.groupsPerTopic, modelRng);
    this.topics = this.topicStart.length - 1;
    this.topicPerm = shuffleInPlace(identity(this.topics), modelRng);
    this.topicCdf = zipfCdf(this.topics, sh.topicZipf.s, sh.topicZipf.q);

    // Vocabularies down the tree: topic words uniform; half of a group's from its topic; half of a
    // label's from its group.
    this.topicVocab = [];
    this.groupVocab = new Array<Uint32Array>(this.groups);
    this.labelVocab = new Array<Uint32Array>(L);
    const labelSpan = sh.labelWordsMax - sh.labelWordsMin + 1;
    for (let t = 0; t < this.topics; t++) {
      const tv = drawVocabulary(sh.topicWords, null, 0, D, modelRng);
      this.topicVocab.push(tv);
      for (let g = this.topicStart[t]!; g < this.topicStart[t + 1]!; g++) {
        const gv = drawVocabulary(sh.groupWords, tv, sh.groupWords >> 1, D, modelRng);
        this.groupVocab[g] = gv;
        for (let k = this.groupStart[g]!; k < this.groupStart[g + 1]!; k++) {
          const size = sh.labelWordsMin + modelRng.below(labelSpan);
          this.labelVocab[this.labelOrder[k]!] = drawVocabulary(size, gv, size >> 1, D, modelRng);
        }
      }
    }
    this.backgroundPerm = shuffleInPlace(identity(D), modelRng);
    this.backgroundCdf = zipfCdf(D, sh.backgroundZipf.s, sh.backgroundZipf.q);

    this.labelMark = new Uint8Array(L);
    this.tf = new Float32Array(D);
    this.weights = new Float64Array(64);
    this.scratch = { labels: new Uint32Array(64), nLabels: 0, ids: new Uint32Array(64), values: new Float32Array(64), nnz: 0 };

    // idf measured on a pilot corpus from its own stream (does not move the point stream).
    this.idf = new Float32Array(D).fill(1);
    const df = new Uint32Array(D);
    this.rng = pilotRng;
    for (let i = 0; i < sh.idfPilot; i++) {
      const p = this.draw();
      for (let k = 0; k < p.nnz; k++) df[p.ids[k]!]!++;
    }
    for (let f = 0; f < D; f++) this.idf[f] = Math.log((1 + sh.idfPilot) / (1 + df[f]!)) + 1;
    this.rng = this.pointRng;
  }

  /** Labels of group g in taxonomy order (the first is the group's most popular). */
  groupLabels(g: number): Uint32Array {
    return this.labelOrder.subarray(this.groupStart[g]!, this.groupStart[g + 1]!);
  }

  /** Groups of topic t (indices for `groupLabels`). */
  topicGroups(t: number): [number, number] {
    return [this.topicStart[t]!, this.topicStart[t + 1]!];
  }

  private cdf(n: number, z: { s: number; q: number }): Float64Array {
    const key = `${n}:${z.s}:${z.q}`;
    let c = this.cdfBySize.get(key);
    if (!c) {
      c = zipfCdf(n, z.s, z.q);
      this.cdfBySize.set(key, c);
    }
    return c;
  }

  private word(vocab: Uint32Array): number {
    return vocab[sampleCdf(this.cdf(vocab.length, this.shape.wordZipf), this.rng.nextFloat())]!;
  }

  private addLabel(l: number): void {
    if (this.labelMark[l] !== 0) return;
    this.labelMark[l] = 1;
    const sc = this.scratch;
    if (sc.nLabels === sc.labels.length) {
      const grown = new Uint32Array(sc.labels.length * 2);
      grown.set(sc.labels);
      sc.labels = grown;
    }
    sc.labels[sc.nLabels++] = l;
  }

  /** Draws the next point of the stream into the returned scratch (valid until the next call). */
  next(): Readonly<PointScratch> {
    const sc = this.draw();
    // tf-idf, L2-normalised, rounded to 4 significant digits, float32.
    const w = this.weights, tf = this.tf;
    let norm = 0;
    for (let i = 0; i < sc.nnz; i++) {
      const f = sc.ids[i]!;
      const x = (1 + Math.log(tf[f]!)) * this.idf[f]!;
      tf[f] = 0;
      w[i] = x;
      norm += x * x;
    }
    const inv = 1 / Math.sqrt(norm);
    for (let i = 0; i < sc.nnz; i++) sc.values[i] = round4(w[i]! * inv);
    return sc;
  }

  /** Draws labels and token counts (left in `tf`, ids sorted in scratch.ids); values are not set. */
  private draw(): PointScratch {
    const sh = this.shape, rng = this.rng, sc = this.scratch;
    sc.nLabels = 0;
    // Aspects: a topic by popularity, a group of it, sibling labels of that group.
    const nAspects = onePlusGeometric(rng, sh.avgAspects, 16);
    for (let a = 0; a < nAspects; a++) {
      const t = this.topicPerm[sampleCdf(this.topicCdf, rng.nextFloat())]!;
      const g0 = this.topicStart[t]!, nG = this.topicStart[t + 1]! - g0;
      const groupCdf = this.cdf(nG, sh.groupZipf);
      const g = g0 + sampleCdf(groupCdf, rng.nextFloat());
      this.aspectTopic[a] = t;
      this.aspectGroup[a] = g;
      const members = this.groupLabels(g);
      const labelCdf = this.cdf(members.length, sh.labelZipf);
      const want = Math.min(members.length, onePlusGeometric(rng, sh.labelsPerAspect, 32));
      for (let k = 0, tries = 0; k < want && tries < 8 * want; tries++) {
        const l = members[sampleCdf(labelCdf, rng.nextFloat())]!;
        if (this.labelMark[l] === 0) k++;
        this.addLabel(l);
      }
      if (nG > 1 && rng.nextFloat() < sh.crossGroup) {
        let g2 = g;
        for (let tries = 0; g2 === g && tries < 16; tries++) g2 = g0 + sampleCdf(groupCdf, rng.nextFloat());
        const m2 = this.groupLabels(g2);
        this.addLabel(m2[sampleCdf(this.cdf(m2.length, sh.labelZipf), rng.nextFloat())]!);
      }
    }
    const nLab = sc.nLabels;
    for (let i = 0; i < nLab; i++) this.labelMark[sc.labels[i]!] = 0;
    const labels = sc.labels.subarray(0, nLab).sort();

    // Mixture shares of this point: mean shares times Gamma(k) noise, normalised (cumulative).
    const m = sh.mix;
    const gamma = () => {
      let x = 0;
      for (let i = 0; i < sh.mixShape; i++) x -= Math.log(1 - rng.nextFloat());
      return x;
    };
    const c0 = m.background * gamma(), c1 = c0 + m.topic * gamma(), c2 = c1 + m.group * gamma(), c3 = c2 + m.label * gamma();

    // Tokens: log-normal length; each token from one component.
    const sigma = 0.6;
    const nTokens = Math.max(3, Math.min(Math.round(sh.avgTokens * Math.exp(sigma * rng.normal() - (sigma * sigma) / 2)), 20 * sh.avgTokens));
    if (sc.ids.length < nTokens) {
      const cap = Math.max(nTokens, sc.ids.length * 2);
      sc.ids = new Uint32Array(cap);
      sc.values = new Float32Array(cap);
      this.weights = new Float64Array(cap);
    }
    const ids = sc.ids, tf = this.tf;
    let nnz = 0;
    for (let i = 0; i < nTokens; i++) {
      const u = rng.nextFloat() * c3;
      let f: number;
      if (u < c0) f = this.backgroundPerm[sampleCdf(this.backgroundCdf, rng.nextFloat())]!;
      else if (u < c1) f = this.word(this.topicVocab[this.aspectTopic[rng.below(nAspects)]!]!);
      else if (u < c2) f = this.word(this.groupVocab[this.aspectGroup[rng.below(nAspects)]!]!);
      else f = this.word(this.labelVocab[labels[rng.below(nLab)]!]!);
      if (tf[f] === 0) ids[nnz++] = f;
      tf[f]!++;
    }
    ids.subarray(0, nnz).sort();
    sc.nnz = nnz;
    if (this.rng !== this.pointRng) for (let i = 0; i < nnz; i++) tf[ids[i]!] = 0; // pilot: counts only
    return sc;
  }
}

/** Options of `synthesizeTaxonomy`. */
export interface SynthesizeTaxonomyOptions {
  /** A named shape (see TAXONOMY_SHAPES) or a custom one. */
  shape: TaxonomyShapeName | TaxonomyShape;
  /** Number of points. */
  points: number;
  /** Seed of the whole distribution and stream. Default 1. */
  seed?: number;
}

/** Generates `points` points in memory (the same rows `generateTaxonomy` writes for the same seed). */
export function synthesizeTaxonomy(opts: SynthesizeTaxonomyOptions): SparseDataset {
  checkCount('points', opts.points);
  const model = new TaxonomyModel(opts.shape, opts.seed ?? 1);
  const sh = model.shape;
  return collectPoints(model, opts.points, sh, sh.avgTokens * 0.8, 3);
}

/** Options of `generateTaxonomy`. */
export interface GenerateTaxonomyOptions {
  /** A named shape (see TAXONOMY_SHAPES) or a custom one. */
  shape: TaxonomyShapeName | TaxonomyShape;
  /** Points in `train.txt`. */
  train: number;
  /** Points in `test.txt`. Default 0 (an empty test file with a header). */
  test?: number;
  /** Seed of the whole distribution and stream. Default 1. */
  seed?: number;
  /** Output folder (created if missing); receives `train.txt` and `test.txt`. */
  outDir: string;
  /** Called every few thousand points with (points written, train + test). Default: none. */
  onProgress?: (points: number, totalPoints: number) => void;
  /** fsync each file before renaming it into place. Default true. */
  fsync?: boolean;
}

/**
 * Writes `train.txt` and `test.txt` (XC format) of the taxonomy model into `outDir`, streaming (one point
 * at a time plus the model's tables), each file atomically.
 */
export async function generateTaxonomy(
  opts: GenerateTaxonomyOptions,
): Promise<{ train: string; test: string; bytes: number; shape: TaxonomyShape }> {
  checkCount('train', opts.train);
  checkCount('test', opts.test ?? 0);
  const model = new TaxonomyModel(opts.shape, opts.seed ?? 1);
  const r = await writePointStream(model, model.shape, opts);
  return { ...r, shape: model.shape };
}
