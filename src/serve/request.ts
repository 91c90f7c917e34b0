// Validation of `POST /predict`, `/explain` and `/learn` bodies (src/serve/server.ts). Pure functions: a body string in, either the
// points to predict (CSR rows, feature ids ascending) or a RequestError with the HTTP status and a message
// that says what is wrong and where. Nothing here throws anything else, whatever the input.
import type { SparseDataset } from '../datasets/csr.js';
import { suggest } from '../util/suggest.js';

/**
 * A client error: answered with `status` and `{"error": message}`. `parsePredictRequest` throws it.
 *
 * @example
 * ```ts
 * const server = await serve('model.sl');
 * const r = await fetch(`${server.url}/predict`, { method: 'POST', body: '{"features": {"x": 1}}' });
 * console.log(r.status, await r.json()); // 400 { error: '...' }: a RequestError's status and message
 * ```
 */
export class RequestError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
    this.name = 'RequestError';
  }
}

/** What a model offers to text requests (the text vectorizer stored with a model trained on text). */
export interface TextFeaturizer {
  /** Feature dimension of the vectors it makes. */
  readonly features: number;
  /** One CSR row per text (labels empty). */
  transform(texts: readonly string[]): SparseDataset;
}

/** What the parser needs to know about the model and the server's limits. */
export interface RequestLimits {
  /** The model's input dimension: feature ids are < features. */
  features: number;
  /** The model's label count: k is capped by it. */
  labels: number;
  /** Largest k a request may ask for. */
  maxK: number;
  /** Most instances in one batch request. */
  maxInstances: number;
  /** k when the request has none. */
  defaultK: number;
  /** mode when the request has none. */
  defaultMode: 'exact' | 'sampled';
  /** What a request's `"mode": "auto"` means for this model (Network.inferenceMode('auto')). */
  autoMode: 'exact' | 'sampled';
  /** The model's text vectorizer, if it was trained on text. */
  text: TextFeaturizer | undefined;
  /** The model's default threshold (its calibration's), or undefined: the model has no calibrated probabilities. */
  threshold: number | undefined;
  /** Candidates per point with a probability (the calibration's shortlist). */
  shortlist: number;
}

/** A parsed request: its points as CSR rows, and how to answer. */
export interface ParsedRequest {
  /** true for `{"instances": [...]}` (answered with `{"predictions": [...]}`), false for one point. */
  batch: boolean;
  /** Labels per point: the top k, or (with `threshold`) at most k of those whose probability reaches it. */
  k: number;
  mode: 'exact' | 'sampled';
  /** Selection by calibrated probability (src/network/calibration.ts). Default: none (top-k). */
  threshold?: number;
  /** POST /explain: features per label. */
  top?: number;
  /** Each point's text, when it came as text (explanations name its tokens). */
  texts?: (string | null)[];
  /** (points + 1) row starts into indices/values. */
  offsets: Uint32Array;
  /** Feature ids, ascending within a row. */
  indices: Uint32Array;
  values: Float32Array;
  points: number;
}

const TOP_FIELDS = ['text', 'features', 'instances', 'k', 'mode', 'threshold'];
const EXPLAIN_FIELDS = [...TOP_FIELDS, 'top'];
const INSTANCE_FIELDS = ['text', 'features'];
const ID = /^(0|[1-9][0-9]{0,9})$/;

const describe = (v: unknown): string => {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return `a string`;
  return typeof v === 'object' ? 'an object' : `${typeof v} ${String(v).slice(0, 40)}`;
};

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function parseJson(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch (e) {
    throw new RequestError(400, `invalid JSON: ${(e as Error).message}`);
  }
}

/** Parses and validates a `POST /predict` body (`explain`: a `POST /explain` body, which may give `top`). Throws RequestError (only). */
export function parsePredictRequest(body: string, limits: RequestLimits, explain = false): ParsedRequest {
  const json = parseJson(body);
  if (!isObject(json)) throw new RequestError(400, `expected a JSON object with "text", "features" or "instances" but received ${describe(json)}`);
  const fields = explain ? EXPLAIN_FIELDS : TOP_FIELDS;
  for (const key of Object.keys(json)) {
    if (!fields.includes(key)) throw new RequestError(400, `unknown field ${JSON.stringify(key.slice(0, 40))}${suggest(key.slice(0, 40), fields, '')} (expected one of ${fields.join(', ')})`);
  }
  const threshold = parseThreshold(json.threshold, limits);
  const k = json.k === undefined && threshold !== undefined ? Math.min(limits.shortlist, limits.labels) : parseK(json.k, limits);
  const mode = parseMode(json.mode, limits);
  const top = explain ? parseTop(json.top) : undefined;
  const given = ['text', 'features', 'instances'].filter((f) => json[f] !== undefined);
  if (given.length !== 1) {
    throw new RequestError(400, given.length === 0
      ? 'expected one of "text", "features" or "instances" in the request'
      : `expected only one of "text", "features" or "instances" but received ${given.map((g) => `"${g}"`).join(' and ')}`);
  }
  let instances: Record<string, unknown>[];
  const batch = given[0] === 'instances';
  if (batch) {
    const list = json.instances;
    if (!Array.isArray(list)) throw new RequestError(400, `expected an array for "instances" but received ${describe(list)}`);
    if (list.length === 0) throw new RequestError(400, 'expected at least one instance in "instances" but received an empty array');
    if (list.length > limits.maxInstances) {
      throw new RequestError(413, `too many instances: ${list.length} (this server accepts at most ${limits.maxInstances} per request)`);
    }
    instances = list.map((inst, i) => {
      if (!isObject(inst)) throw new RequestError(400, `instances[${i}]: expected an object with "text" or "features" but received ${describe(inst)}`);
      return inst;
    });
  } else {
    instances = [json];
  }
  return { batch, k, mode, ...(threshold !== undefined ? { threshold } : {}), ...(top !== undefined ? { top } : {}), ...toRows(instances, batch, limits) };
}

/** `"threshold"`: a probability in (0, 1], or "model" (the calibration's). Needs a calibrated model. */
function parseThreshold(t: unknown, limits: RequestLimits): number | undefined {
  if (t === undefined) return undefined;
  if (limits.threshold === undefined) {
    throw new RequestError(400, '"threshold" needs calibrated probabilities, and this model has none (train it with held-out validation, the default, to fit them)');
  }
  if (t === 'model') return limits.threshold;
  if (typeof t !== 'number' || !(t > 0 && t <= 1)) {
    throw new RequestError(400, `expected a probability in (0, 1] or "model" for "threshold" but received ${JSON.stringify(t)?.slice(0, 40) ?? String(t)}`);
  }
  return t;
}

/** `"top"` of /explain: features per label, 1 to 100. Default 10. */
function parseTop(t: unknown): number {
  if (t === undefined) return 10;
  if (typeof t !== 'number' || !Number.isInteger(t) || t < 1 || t > 100) {
    throw new RequestError(400, `expected an integer from 1 to 100 for "top" but received ${JSON.stringify(t)?.slice(0, 40) ?? String(t)}`);
  }
  return t;
}

/** One example of `POST /learn`: its point and its labels (ids, or names for a model with label names). */
export interface LearnExample {
  labels: (number | string)[];
}

/** A parsed `POST /learn` body: the examples' points as CSR rows, and their labels as given. */
export interface ParsedLearn {
  offsets: Uint32Array;
  indices: Uint32Array;
  values: Float32Array;
  points: number;
  labels: (number | string)[][];
}

const LEARN_FIELDS = ['examples'];
const EXAMPLE_FIELDS = ['text', 'features', 'labels'];

/**
 * Parses `{"examples": [{"features": {...} | "text": "...", "labels": [id or name, ...]}, ...]}`. Label ids
 * are integers from 0 to `maxLabel`; names are non-empty strings without commas, tabs or line breaks
 * (a model with label names). Throws RequestError (only).
 */
export function parseLearnRequest(body: string, limits: RequestLimits, o: { names: boolean; maxLabel: number }): ParsedLearn {
  const json = parseJson(body);
  if (!isObject(json)) throw new RequestError(400, `expected a JSON object {"examples": [...]} but received ${describe(json)}`);
  for (const key of Object.keys(json)) {
    if (!LEARN_FIELDS.includes(key)) throw new RequestError(400, `unknown field ${JSON.stringify(key.slice(0, 40))}${suggest(key.slice(0, 40), LEARN_FIELDS, '')} (expected "examples")`);
  }
  const list = json.examples;
  if (!Array.isArray(list)) throw new RequestError(400, `expected an array for "examples" but received ${describe(list)}`);
  if (list.length === 0) throw new RequestError(400, 'expected at least one example in "examples" but received an empty array');
  if (list.length > limits.maxInstances) throw new RequestError(413, `too many examples: ${list.length} (this server accepts at most ${limits.maxInstances} per request)`);
  const labels: (number | string)[][] = [];
  const points = list.map((ex, i) => {
    const where = `examples[${i}]: `;
    if (!isObject(ex)) throw new RequestError(400, `${where}expected an object with "features" or "text", and "labels", but received ${describe(ex)}`);
    for (const key of Object.keys(ex)) {
      if (!EXAMPLE_FIELDS.includes(key)) throw new RequestError(400, `${where}unknown field ${JSON.stringify(key.slice(0, 40))}${suggest(key.slice(0, 40), EXAMPLE_FIELDS, '')} (expected "features" or "text", and "labels")`);
    }
    const ls = ex.labels;
    if (!Array.isArray(ls) || ls.length === 0) throw new RequestError(400, `${where}expected a non-empty array of labels for "labels" but received ${describe(ls)}`);
    const seen = new Set<number | string>();
    for (const l of ls) {
      if (typeof l === 'number') {
        if (!Number.isInteger(l) || l < 0 || l > o.maxLabel) throw new RequestError(400, `${where}expected label ids from 0 to ${o.maxLabel} but received ${JSON.stringify(l)}`);
      } else if (typeof l === 'string') {
        if (!o.names) throw new RequestError(400, `${where}this model has no label names: give label ids (integers) but received ${JSON.stringify(l.slice(0, 40))}`);
        if (l === '' || l.length > 1000 || /[,\t\r\n]/.test(l)) throw new RequestError(400, `${where}invalid label name ${JSON.stringify(l.slice(0, 40))} (names are 1 to 1000 characters without commas, tabs or line breaks)`);
      } else {
        throw new RequestError(400, `${where}expected label ids or names in "labels" but received ${describe(l)}`);
      }
      seen.add(l);
    }
    labels.push([...seen]);
    const { labels: _, ...point } = ex;
    return point;
  });
  return { ...toRows(points, true, limits, 'examples'), labels };
}

function parseK(k: unknown, limits: RequestLimits): number {
  if (k === undefined) return Math.min(limits.defaultK, limits.labels);
  const max = Math.min(limits.maxK, limits.labels);
  if (typeof k !== 'number' || !Number.isInteger(k) || k < 1 || k > max) {
    throw new RequestError(400, `expected an integer from 1 to ${max} for "k" but received ${JSON.stringify(k)?.slice(0, 40) ?? String(k)}`);
  }
  return k;
}

/** `"mode"`: "exact", "sampled" or "auto" (the model's: sampled for a sampled output layer with a wide part). */
export function parseMode(mode: unknown, limits: Pick<RequestLimits, 'defaultMode' | 'autoMode'>, what = '"mode"'): 'exact' | 'sampled' {
  if (mode === undefined) return limits.defaultMode;
  if (mode === 'auto') return limits.autoMode;
  if (mode !== 'exact' && mode !== 'sampled') {
    throw new RequestError(400, `expected "exact", "sampled" or "auto" for ${what} but received ${JSON.stringify(mode)?.slice(0, 40) ?? String(mode)}`);
  }
  return mode;
}

/** The instances' CSR rows; text instances go through the model's vectorizer, all at once. */
function toRows(
  instances: Record<string, unknown>[], batch: boolean, limits: RequestLimits, list = 'instances',
): { offsets: Uint32Array; indices: Uint32Array; values: Float32Array; points: number; texts?: (string | null)[] } {
  const where = (i: number) => (batch ? `${list}[${i}]: ` : '');
  const rows: { ids: number[]; vals: number[] }[] = new Array(instances.length);
  const texts: string[] = [];
  const textRows: number[] = [];
  instances.forEach((inst, i) => {
    for (const key of Object.keys(inst)) {
      if (batch && !INSTANCE_FIELDS.includes(key)) {
        throw new RequestError(400, `${where(i)}unknown field ${JSON.stringify(key.slice(0, 40))}${suggest(key.slice(0, 40), INSTANCE_FIELDS, '')} (expected "text" or "features")`);
      }
    }
    if (inst.text !== undefined && inst.features !== undefined) {
      throw new RequestError(400, `${where(i)}expected "text" or "features" but received both`);
    }
    if (inst.text !== undefined) {
      if (typeof inst.text !== 'string') throw new RequestError(400, `${where(i)}expected a string for "text" but received ${describe(inst.text)}`);
      if (!limits.text) {
        throw new RequestError(400, `${where(i)}this model was not trained on text (it has no text vectorizer): send "features" ({"feature id": value, ...}) instead`);
      }
      texts.push(inst.text);
      textRows.push(i);
    } else if (inst.features !== undefined) {
      rows[i] = parseFeatures(inst.features, where(i), limits.features);
    } else {
      throw new RequestError(400, `${where(i)}expected "text" or "features"`);
    }
  });
  if (texts.length > 0) {
    let t: SparseDataset;
    try {
      t = limits.text!.transform(texts);
    } catch (e) {
      throw new RequestError(400, `text could not be featurised: ${(e as Error).message}`);
    }
    textRows.forEach((row, j) => {
      const ids: number[] = [], vals: number[] = [];
      for (let p = t.offsets[j]!; p < t.offsets[j + 1]!; p++) {
        ids.push(t.indices[p]!);
        vals.push(t.values[p]!);
      }
      rows[row] = { ids, vals };
    });
  }
  const textOf: (string | null)[] | undefined = texts.length > 0 ? instances.map(() => null) : undefined;
  textRows.forEach((row, j) => (textOf![row] = texts[j]!));
  let nnz = 0;
  for (const r of rows) nnz += r.ids.length;
  const offsets = new Uint32Array(rows.length + 1);
  const indices = new Uint32Array(nnz);
  const values = new Float32Array(nnz);
  let p = 0;
  rows.forEach((r, i) => {
    indices.set(r.ids, p);
    values.set(r.vals, p);
    p += r.ids.length;
    offsets[i + 1] = p;
  });
  return { offsets, indices, values, points: rows.length, ...(textOf ? { texts: textOf } : {}) };
}

/** `{"id": value, ...}`: ids are decimal integers below `features`, values finite numbers; zeros dropped. */
function parseFeatures(f: unknown, where: string, features: number): { ids: number[]; vals: number[] } {
  if (!isObject(f)) throw new RequestError(400, `${where}expected an object {"feature id": value, ...} for "features" but received ${describe(f)}`);
  const pairs: [number, number][] = [];
  for (const [key, v] of Object.entries(f)) {
    const id = ID.test(key) ? Number(key) : NaN;
    if (!(id < features)) {
      throw new RequestError(400, `${where}unknown feature ${JSON.stringify(key.slice(0, 40))}: feature ids are integers from 0 to ${features - 1}`);
    }
    if (typeof v !== 'number' || !Number.isFinite(v)) {
      throw new RequestError(400, `${where}expected a finite number for feature ${key} but received ${describe(v)}`);
    }
    if (Math.fround(v) === 0) continue;
    if (!Number.isFinite(Math.fround(v))) throw new RequestError(400, `${where}feature ${key}: ${v} is out of the float32 range`);
    pairs.push([id, v]);
  }
  // Integer-like keys come out of Object.entries in ascending order already; sort anyway (cheap when sorted).
  pairs.sort((a, b) => a[0] - b[0]);
  return { ids: pairs.map((p) => p[0]), vals: pairs.map((p) => p[1]) };
}
