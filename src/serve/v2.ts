// The Open Inference Protocol (KServe V2, REST): the bodies of its routes for a sublinear model
// (docs/serving.md "Open Inference Protocol"). Pure functions, like request.ts: a body in, points to predict
// or a RequestError with a 4xx status and a message out.
//
// The model's tensors:
//   inputs   "text"    BYTES [n]           a model trained on text: one text per point
//            "features" FP32 [n, inputDim] dense rows (zeros dropped)
//            "indices" INT64 [nnz], "values" FP32 [nnz], "offsets" INT64 [n + 1]: sparse rows (CSR: point i's
//            features are indices[offsets[i] .. offsets[i + 1]))
//   outputs  "labels" INT64 [n, k] (-1 where a point has fewer), "scores" FP32 [n, k], "probabilities" FP32
//            [n, k] (a calibrated model), "label_names" BYTES [n, k] (a model with label names; "" where none)
// Request parameters (server-specific, as the protocol allows): "k", "threshold" (a probability or
// "model"), "mode" ("exact", "sampled" or "auto").
import { parseMode, RequestError, type ParsedRequest, type RequestLimits } from './request.js';

/** The tensor metadata of the model metadata response. */
export interface MetadataTensor {
  name: string;
  datatype: string;
  shape: number[];
}

/** `GET /v2/models/<name>` (the protocol's $metadata_model_response). */
export interface ModelMetadata {
  name: string;
  platform: string;
  inputs: MetadataTensor[];
  outputs: MetadataTensor[];
  /** sublinear's own: labels, whether probabilities are calibrated and the default threshold. */
  parameters: Record<string, string | number | boolean>;
}

/** The model metadata of a model with `features` inputs (text: a text model), `labels` labels. */
export function modelMetadata(name: string, o: { features: number; labels: number; text: boolean; names: boolean; calibrated: boolean; threshold?: number }): ModelMetadata {
  const inputs: MetadataTensor[] = o.text
    ? [{ name: 'text', datatype: 'BYTES', shape: [-1] }]
    : [
      { name: 'features', datatype: 'FP32', shape: [-1, o.features] },
      { name: 'indices', datatype: 'INT64', shape: [-1] },
      { name: 'values', datatype: 'FP32', shape: [-1] },
      { name: 'offsets', datatype: 'INT64', shape: [-1] },
    ];
  const outputs: MetadataTensor[] = [
    { name: 'labels', datatype: 'INT64', shape: [-1, -1] },
    { name: 'scores', datatype: 'FP32', shape: [-1, -1] },
    ...(o.calibrated ? [{ name: 'probabilities', datatype: 'FP32', shape: [-1, -1] }] : []),
    ...(o.names ? [{ name: 'label_names', datatype: 'BYTES', shape: [-1, -1] }] : []),
  ];
  return {
    name, platform: 'sublinear_sl', inputs, outputs,
    parameters: { labels: o.labels, input_dim: o.features, calibrated: o.calibrated, ...(o.threshold !== undefined ? { threshold: o.threshold } : {}) },
  };
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const NUMERIC = new Set(['BOOL', 'UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64', 'FP16', 'FP32', 'FP64']);
const INTEGER = new Set(['UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64']);
const REQUEST_FIELDS = ['id', 'parameters', 'inputs', 'outputs'];
const INPUT_FIELDS = ['name', 'shape', 'datatype', 'parameters', 'data'];

/** A parsed inference request: the points, how to answer, and which outputs. */
export interface ParsedInfer {
  id?: string;
  request: Omit<ParsedRequest, 'batch'>;
  /** Output tensors asked for (all when the request names none). */
  outputs: string[] | null;
}

/** A tensor's data flattened (row-major), checked against its shape. */
function flatten(t: Record<string, unknown>, where: string): unknown[] {
  const data = t.data;
  if (!Array.isArray(data)) throw new RequestError(400, `${where}: expected an array for "data"`);
  const flat = data.flat(Infinity);
  const shape = t.shape;
  if (!Array.isArray(shape) || shape.length === 0 || !shape.every((d) => typeof d === 'number' && Number.isSafeInteger(d) && d >= 0)) {
    throw new RequestError(400, `${where}: expected "shape" to be a non-empty array of non-negative integers`);
  }
  const size = (shape as number[]).reduce((a, b) => a * b, 1);
  if (size !== flat.length) throw new RequestError(400, `${where}: its shape [${shape.join(', ')}] holds ${size} elements but "data" holds ${flat.length}`);
  return flat;
}

/**
 * Parses `POST /v2/models/<name>/infer` (the protocol's $inference_request). `defaults`: k and mode of a
 * request that gives none.
 */
export function parseInferRequest(body: string, limits: RequestLimits, text: (texts: string[]) => { offsets: Uint32Array; indices: Uint32Array; values: Float32Array }): ParsedInfer {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch (e) {
    throw new RequestError(400, `invalid JSON: ${(e as Error).message}`);
  }
  if (!isObject(json)) throw new RequestError(400, 'expected an inference request object {"inputs": [...]}');
  for (const key of Object.keys(json)) {
    if (!REQUEST_FIELDS.includes(key)) throw new RequestError(400, `unknown field ${JSON.stringify(key.slice(0, 40))} of the inference request (expected ${REQUEST_FIELDS.join(', ')})`);
  }
  if (json.id !== undefined && typeof json.id !== 'string') throw new RequestError(400, 'expected a string for "id"');
  const params = json.parameters === undefined ? {} : json.parameters;
  if (!isObject(params)) throw new RequestError(400, 'expected an object for "parameters"');
  for (const key of Object.keys(params)) {
    if (!['k', 'threshold', 'mode'].includes(key)) throw new RequestError(400, `unknown parameter ${JSON.stringify(key.slice(0, 40))} (this server takes k, threshold and mode)`);
  }
  const inputs = json.inputs;
  if (!Array.isArray(inputs) || inputs.length === 0) throw new RequestError(400, 'expected a non-empty array for "inputs"');
  const byName = new Map<string, Record<string, unknown>>();
  inputs.forEach((t, i) => {
    if (!isObject(t)) throw new RequestError(400, `inputs[${i}]: expected a tensor object`);
    for (const key of Object.keys(t)) {
      if (!INPUT_FIELDS.includes(key)) throw new RequestError(400, `inputs[${i}]: unknown field ${JSON.stringify(key.slice(0, 40))} (expected ${INPUT_FIELDS.join(', ')})`);
    }
    if (typeof t.name !== 'string') throw new RequestError(400, `inputs[${i}]: expected a string for "name"`);
    if (typeof t.datatype !== 'string') throw new RequestError(400, `inputs[${i}]: expected a string for "datatype"`);
    if (byName.has(t.name)) throw new RequestError(400, `input ${JSON.stringify(t.name)} is given twice`);
    byName.set(t.name, t);
  });
  const names = [...byName.keys()].sort().join(',');
  let rows: { offsets: Uint32Array; indices: Uint32Array; values: Float32Array; points: number; texts?: (string | null)[] };
  if (names === 'text') {
    if (!limits.text) throw new RequestError(400, 'input "text": this model was not trained on text (its inputs are "features", or "indices", "values" and "offsets")');
    const t = byName.get('text')!;
    if (t.datatype !== 'BYTES') throw new RequestError(400, `input "text": expected datatype BYTES but received ${JSON.stringify(t.datatype)}`);
    const flat = flatten(t, 'input "text"');
    if (!flat.every((s) => typeof s === 'string')) throw new RequestError(400, 'input "text": expected strings in "data"');
    const texts = flat as string[];
    checkPoints(texts.length, limits);
    let r;
    try {
      r = text(texts);
    } catch (e) {
      throw new RequestError(400, `text could not be featurised: ${(e as Error).message}`);
    }
    rows = { ...r, points: texts.length, texts };
  } else if (names === 'features') {
    rows = denseRows(byName.get('features')!, limits);
  } else if (names === 'indices,offsets,values') {
    rows = sparseRows(byName.get('indices')!, byName.get('values')!, byName.get('offsets')!, limits);
  } else {
    throw new RequestError(400, `expected the inputs ${limits.text ? '"text"' : '"features", or "indices", "values" and "offsets"'} but received ${[...byName.keys()].map((n) => JSON.stringify(n.slice(0, 40))).join(', ')}`);
  }
  let outputs: string[] | null = null;
  if (json.outputs !== undefined) {
    if (!Array.isArray(json.outputs)) throw new RequestError(400, 'expected an array for "outputs"');
    outputs = json.outputs.map((o, i) => {
      if (!isObject(o) || typeof o.name !== 'string') throw new RequestError(400, `outputs[${i}]: expected an object with a string "name"`);
      return o.name;
    });
  }
  const threshold = parseThreshold(params.threshold, limits);
  const k = params.k === undefined
    ? Math.min(threshold !== undefined ? limits.shortlist : limits.defaultK, limits.labels)
    : intParam(params.k, 'k', 1, Math.min(limits.maxK, limits.labels));
  const mode = parseMode(params.mode, limits, 'parameter "mode"');
  return { ...(typeof json.id === 'string' ? { id: json.id } : {}), request: { k, mode, ...(threshold !== undefined ? { threshold } : {}), ...rows }, outputs };
}

function checkPoints(n: number, limits: RequestLimits): void {
  if (n === 0) throw new RequestError(400, 'expected at least one point');
  if (n > limits.maxInstances) throw new RequestError(413, `too many points: ${n} (this server accepts at most ${limits.maxInstances} per request)`);
}

function intParam(v: unknown, name: string, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) throw new RequestError(400, `expected an integer from ${min} to ${max} for parameter "${name}" but received ${JSON.stringify(v)?.slice(0, 40)}`);
  return v;
}

function parseThreshold(t: unknown, limits: RequestLimits): number | undefined {
  if (t === undefined) return undefined;
  if (limits.threshold === undefined) throw new RequestError(400, 'parameter "threshold" needs calibrated probabilities, and this model has none');
  if (t === 'model') return limits.threshold;
  if (typeof t !== 'number' || !(t > 0 && t <= 1)) throw new RequestError(400, `expected a probability in (0, 1] or "model" for parameter "threshold" but received ${JSON.stringify(t)?.slice(0, 40)}`);
  return t;
}

/** Numbers of a numeric tensor, each finite and (integer types) an integer. */
function numbers(t: Record<string, unknown>, where: string, integer: boolean): number[] {
  const dt = t.datatype as string;
  if (!NUMERIC.has(dt) || dt === 'BOOL') throw new RequestError(400, `${where}: expected a numeric datatype but received ${JSON.stringify(dt)}`);
  if (integer && !INTEGER.has(dt)) throw new RequestError(400, `${where}: expected an integer datatype (INT64, UINT32, ...) but received ${dt}`);
  const flat = flatten(t, where);
  for (let i = 0; i < flat.length; i++) {
    const v = flat[i];
    if (typeof v !== 'number' || !Number.isFinite(v) || (integer && !Number.isInteger(v))) {
      throw new RequestError(400, `${where}: element ${i} is ${JSON.stringify(v)?.slice(0, 40)}, not a finite ${integer ? 'integer' : 'number'}`);
    }
  }
  return flat as number[];
}

function denseRows(t: Record<string, unknown>, limits: RequestLimits) {
  const shape = t.shape as number[];
  const v = numbers(t, 'input "features"', false);
  if (shape.length !== 2 || shape[1] !== limits.features) throw new RequestError(400, `input "features": expected shape [n, ${limits.features}] but received [${shape.join(', ')}]`);
  const n = shape[0]!;
  checkPoints(n, limits);
  const ids: number[] = [], vals: number[] = [];
  const offsets = new Uint32Array(n + 1);
  for (let i = 0; i < n; i++) {
    for (let f = 0; f < limits.features; f++) {
      const x = Math.fround(v[i * limits.features + f]!);
      if (x === 0) continue;
      if (!Number.isFinite(x)) throw new RequestError(400, `input "features": the value of point ${i}, feature ${f} is out of the float32 range`);
      ids.push(f);
      vals.push(x);
    }
    offsets[i + 1] = ids.length;
  }
  return { offsets, indices: Uint32Array.from(ids), values: Float32Array.from(vals), points: n };
}

function sparseRows(ti: Record<string, unknown>, tv: Record<string, unknown>, to: Record<string, unknown>, limits: RequestLimits) {
  const idx = numbers(ti, 'input "indices"', true), val = numbers(tv, 'input "values"', false), off = numbers(to, 'input "offsets"', true);
  if (idx.length !== val.length) throw new RequestError(400, `inputs "indices" and "values" hold ${idx.length} and ${val.length} elements: they must be as many`);
  const n = off.length - 1;
  checkPoints(n, limits);
  if (off[0] !== 0 || off[n] !== idx.length) throw new RequestError(400, `input "offsets": expected to run from 0 to ${idx.length} (the nonzeros) but runs from ${off[0]} to ${off[n]}`);
  const offsets = new Uint32Array(n + 1), indices: number[] = [], values: number[] = [];
  for (let i = 0; i < n; i++) {
    if (off[i + 1]! < off[i]!) throw new RequestError(400, `input "offsets": decreases at point ${i}`);
    const pairs: [number, number][] = [];
    const seen = new Set<number>();
    for (let e = off[i]!; e < off[i + 1]!; e++) {
      const f = idx[e]!;
      if (f < 0 || f >= limits.features) throw new RequestError(400, `input "indices": point ${i} names feature ${f}; feature ids are integers from 0 to ${limits.features - 1}`);
      if (seen.has(f)) throw new RequestError(400, `input "indices": point ${i} names feature ${f} twice`);
      seen.add(f);
      const x = Math.fround(val[e]!);
      if (!Number.isFinite(x)) throw new RequestError(400, `input "values": element ${e} is out of the float32 range`);
      if (x !== 0) pairs.push([f, x]);
    }
    pairs.sort((a, b) => a[0] - b[0]);
    for (const [f, x] of pairs) {
      indices.push(f);
      values.push(x);
    }
    offsets[i + 1] = indices.length;
  }
  return { offsets, indices: Uint32Array.from(indices), values: Float32Array.from(values), points: n };
}

/** The predictions of one point (what the server selected for it). */
export interface PointAnswer {
  labels: number[];
  scores: number[];
  probabilities?: number[];
  names?: (string | null)[];
}

/**
 * The $inference_response of `points` answers, `k` columns (a point with fewer labels is padded: -1, 0, "").
 * `outputs`: the ones asked for (null: all the model has). Throws RequestError(400) for an unknown output.
 */
export function inferResponse(
  modelName: string, id: string | undefined, points: PointAnswer[], k: number, outputs: string[] | null, has: { probabilities: boolean; names: boolean },
): Record<string, unknown> {
  const available = ['labels', 'scores', ...(has.probabilities ? ['probabilities'] : []), ...(has.names ? ['label_names'] : [])];
  const want = outputs ?? available;
  for (const o of want) if (!available.includes(o)) throw new RequestError(400, `unknown output ${JSON.stringify(o.slice(0, 40))} (this model has ${available.join(', ')})`);
  const n = points.length;
  const pad = <T>(pick: (p: PointAnswer) => T[] | undefined, fill: T): T[] => {
    const out: T[] = [];
    for (const p of points) {
      const v = pick(p) ?? [];
      for (let j = 0; j < k; j++) out.push(j < v.length ? v[j]! : fill);
    }
    return out;
  };
  const tensor = (name: string) => {
    switch (name) {
      case 'labels': return { name, datatype: 'INT64', shape: [n, k], data: pad((p) => p.labels, -1) };
      case 'scores': return { name, datatype: 'FP32', shape: [n, k], data: pad((p) => p.scores, 0) };
      case 'probabilities': return { name, datatype: 'FP32', shape: [n, k], data: pad((p) => p.probabilities, 0) };
      default: return { name, datatype: 'BYTES', shape: [n, k], data: pad((p) => p.names?.map((s) => s ?? ''), '') };
    }
  };
  return { model_name: modelName, ...(id !== undefined ? { id } : {}), outputs: want.map(tensor) };
}
