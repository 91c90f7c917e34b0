// The Open Inference Protocol (KServe V2) REST routes, checked against what the protocol's specification
// requires of a compliant server (kserve/open-inference-protocol, specification/protocol/inference_rest.md,
// and the KServe "Predict Protocol - Version 2" it came from):
//   - Health: GET v2/health/live, v2/health/ready, v2/models/${MODEL_NAME}/ready; "A 200 status code indicates
//     true and a 4xx status code indicates false"; bodies, when given, {"live": bool} / {"ready": bool},
//     {"name": $string, "ready": $bool}.
//   - Server metadata: GET v2 -> {"name": $string, "version": $string, "extensions": [$string, ...]}.
//   - Model metadata: GET v2/models/${MODEL_NAME} -> {"name", "versions" #optional, "platform", "inputs":
//     [$metadata_tensor], "outputs": [$metadata_tensor]}, $metadata_tensor = {"name", "datatype", "shape"}
//     with datatypes from the Tensor Data Types table and -1 for variable-size dimensions; platform names
//     use the format "<project>_<format>".
//   - Inference: POST v2/models/${MODEL_NAME}/infer with {"id" #optional, "parameters" #optional, "inputs":
//     [{"name", "shape", "datatype", "parameters" #optional, "data"}], "outputs" #optional}; the response
//     {"model_name", "model_version" (absent without versioning), "id" (the request's, if any), "outputs":
//     [{"name", "shape", "datatype", "data"}]}; tensor data row-major, nested or flattened; "outputs" in
//     the request selects the outputs returned (all when absent).
//   - Errors: "a failed ... request must be indicated by an HTTP error status (typically 400). The HTTP body
//     must contain" {"error": $string}.
//   - "All strings in all contexts are case-sensitive."
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Network } from '../../src/network/network.js';
import { fit } from '../../src/train/fit-network.js';
import { serve, type PredictionServer } from '../../src/serve/server.js';
import { subset, synthesize } from '../../src/datasets/index.js';
import { TextVectorizer } from '../../src/text/vectorizer.js';
import { LabelNames, labelledDataset } from '../../src/text/labels.js';
import { parseTextLine } from '../../src/datasets/text-reader.js';
import { topicLines } from '../text/synthetic-text.js';

/** The protocol's Tensor Data Types. */
const DATATYPES = ['BOOL', 'UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64', 'FP16', 'FP32', 'FP64', 'BYTES'];

const all = synthesize({ shape: 'tiny', points: 1700, seed: 21 });
const train = subset(all, Uint32Array.from({ length: 1500 }, (_, i) => i));
const test = subset(all, Uint32Array.from({ length: 200 }, (_, i) => 1500 + i));
let numeric: PredictionServer, text: PredictionServer, textNet: Network, net: Network;

beforeAll(async () => {
  net = new Network({ inputDim: train.features, seed: 3, layers: [{ size: 32 }, { size: train.labels }] });
  await fit(net, train, { validation: { maxEpochs: 4, minHoldout: 50, refitMaxPoints: 0 }, workers: 0 });
  expect(net.calibration).not.toBeNull();
  numeric = await serve(net, { port: 0, workers: 1, modelName: 'tiny' });
  const lines = topicLines(600, 0, 8, 2).map((l, i) => parseTextLine(l, 'mem', i + 1));
  const v = TextVectorizer.fit(lines.map((l) => l.text));
  const names = new LabelNames();
  const d = labelledDataset({ points: lines.length, texts: lines.map((l) => l.text), labels: lines.map((l) => l.labels), lines: new Uint32Array(lines.length) }, v, names, true).dataset;
  textNet = new Network({ inputDim: v.features, seed: 3, layers: [{ size: 16 }, { size: names.size }] });
  textNet.textVectorizer = v;
  textNet.labelNames = names.names;
  await fit(textNet, d, { epochs: 4, workers: 0 });
  text = await serve(textNet, { port: 0, workers: 1, modelName: 'topics' });
}, 120_000);
afterAll(async () => {
  await numeric?.close();
  await text?.close();
});

async function call(s: PredictionServer, method: string, path: string, body?: unknown): Promise<{ status: number; body: any; raw: string }> {
  const r = await fetch(`${s.url}${path}`, { method, ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {}) });
  const raw = await r.text();
  let parsed: unknown = raw;
  try {
    parsed = JSON.parse(raw);
  } catch { /* not JSON */ }
  return { status: r.status, body: parsed, raw };
}

/** Checks a $response_output / $metadata_tensor against the protocol's rules; returns the flat data. */
function checkTensor(t: any, withData: boolean): unknown[] {
  expect(typeof t.name).toBe('string');
  expect(DATATYPES).toContain(t.datatype);
  expect(Array.isArray(t.shape)).toBe(true);
  for (const d of t.shape) expect(Number.isInteger(d) && (d >= 0 || (!withData && d === -1))).toBe(true);
  if (!withData) return [];
  const flat = (t.data as unknown[]).flat(Infinity);
  expect(flat).toHaveLength(t.shape.reduce((a: number, b: number) => a * b, 1));
  return flat;
}

function features(d: typeof test, i: number) {
  const lo = d.offsets[i]!, hi = d.offsets[i + 1]!;
  return { indices: Array.from(d.indices.subarray(lo, hi)), values: Array.from(d.values.subarray(lo, hi)) };
}

describe('Open Inference Protocol: health and metadata', () => {
  it('server live and ready, model ready: 200 with the JSON the protocol gives', async () => {
    for (const s of [numeric, text]) {
      expect(await call(s, 'GET', '/v2/health/live')).toMatchObject({ status: 200, body: { live: true } });
      expect(await call(s, 'GET', '/v2/health/ready')).toMatchObject({ status: 200, body: { ready: true } });
    }
    expect(await call(numeric, 'GET', '/v2/models/tiny/ready')).toMatchObject({ status: 200, body: { name: 'tiny', ready: true } });
  });

  it('server metadata: name, version and extensions as strings', async () => {
    const r = await call(numeric, 'GET', '/v2');
    expect(r.status).toBe(200);
    expect(typeof r.body.name).toBe('string');
    expect(typeof r.body.version).toBe('string');
    expect(Array.isArray(r.body.extensions) && r.body.extensions.every((e: unknown) => typeof e === 'string')).toBe(true);
  });

  it('model metadata: name, a "<project>_<format>" platform, input and output tensors of the protocol\'s types', async () => {
    const r = await call(numeric, 'GET', '/v2/models/tiny');
    expect(r.status).toBe(200);
    expect(r.body.name).toBe('tiny');
    expect(r.body.platform).toMatch(/^[a-z0-9]+_[a-z0-9]+$/);
    expect(r.body.versions).toBeUndefined();
    for (const t of [...r.body.inputs, ...r.body.outputs]) checkTensor(t, false);
    expect(r.body.inputs.map((t: any) => t.name)).toEqual(['features', 'indices', 'values', 'offsets']);
    expect(r.body.inputs[0].shape).toEqual([-1, train.features]);
    expect(r.body.outputs.map((t: any) => t.name)).toEqual(['labels', 'scores', 'probabilities']);
    const t = await call(text, 'GET', '/v2/models/topics');
    expect(t.body.inputs).toEqual([{ name: 'text', datatype: 'BYTES', shape: [-1] }]);
    expect(t.body.outputs.map((x: any) => x.name)).toEqual(['labels', 'scores', 'label_names']);
  });

  it('errors: an HTTP error status and {"error": string}, for an unknown model (names are case-sensitive) or version', async () => {
    for (const path of ['/v2/models/other', '/v2/models/TINY', '/v2/models/TINY/ready', '/v2/models/tiny/versions/1', '/v2/models/other/infer']) {
      const r = await call(numeric, path.endsWith('infer') ? 'POST' : 'GET', path, path.endsWith('infer') ? { inputs: [] } : undefined);
      expect(r.status).toBeGreaterThanOrEqual(400);
      expect(r.status).toBeLessThan(500);
      expect(Object.keys(r.body)).toEqual(['error']);
      expect(typeof r.body.error).toBe('string');
    }
  });
});

describe('Open Inference Protocol: inference', () => {
  it('sparse inputs: the response names the model, returns the request id, and holds every output, equal to Network.predict', async () => {
    const rows = [0, 1, 2];
    const f = rows.map((i) => features(test, i));
    const offsets = [0];
    for (const x of f) offsets.push(offsets.at(-1)! + x.indices.length);
    const r = await call(numeric, 'POST', '/v2/models/tiny/infer', {
      id: 'req-42', parameters: { k: 3 },
      inputs: [
        { name: 'indices', shape: [offsets.at(-1)], datatype: 'INT64', data: f.flatMap((x) => x.indices) },
        { name: 'values', shape: [offsets.at(-1)], datatype: 'FP32', data: f.flatMap((x) => x.values) },
        { name: 'offsets', shape: [rows.length + 1], datatype: 'INT64', data: offsets },
      ],
    });
    expect(r.status).toBe(200);
    expect(r.body.model_name).toBe('tiny');
    expect(r.body.model_version).toBeUndefined();
    expect(r.body.id).toBe('req-42');
    const out = Object.fromEntries(r.body.outputs.map((t: any) => [t.name, t]));
    expect(Object.keys(out)).toEqual(['labels', 'scores', 'probabilities']);
    for (const t of r.body.outputs) expect(t.shape).toEqual([3, 3]);
    const labels = checkTensor(out.labels, true), scores = checkTensor(out.scores, true), probs = checkTensor(out.probabilities, true);
    const want = await net.predict(subset(test, Uint32Array.from(rows)), { k: 3, workers: 0 });
    expect(labels).toEqual(Array.from(want.labels));
    expect(scores.map((x) => Math.fround(x as number))).toEqual(Array.from(want.scores));
    expect(probs.map((x) => Math.fround(x as number))).toEqual(Array.from(want.probabilities!));
  });

  it('dense inputs, nested or flattened, give the same answer; "outputs" selects the tensors returned', async () => {
    const dense = [0, 1].map((i) => {
      const row = new Array(train.features).fill(0);
      const f = features(test, i);
      f.indices.forEach((id, j) => (row[id] = f.values[j]));
      return row;
    });
    const nested = await call(numeric, 'POST', '/v2/models/tiny/infer', { inputs: [{ name: 'features', shape: [2, train.features], datatype: 'FP32', data: dense }] });
    const flat = await call(numeric, 'POST', '/v2/models/tiny/infer', { inputs: [{ name: 'features', shape: [2, train.features], datatype: 'FP32', data: dense.flat() }], outputs: [{ name: 'labels' }] });
    expect(nested.status).toBe(200);
    expect(nested.body.id).toBeUndefined();
    expect(flat.body.outputs).toHaveLength(1);
    expect(flat.body.outputs[0]).toEqual(nested.body.outputs[0]);
    expect(flat.body.outputs[0].shape).toEqual([2, 5]); // the server's default k
  });

  it('BYTES text inputs and label names; selection by threshold pads short rows with -1 and ""', async () => {
    const r = await call(text, 'POST', '/v2/models/topics/infer', {
      parameters: { k: 2 }, inputs: [{ name: 'text', shape: [2], datatype: 'BYTES', data: ['w3a the w3b package w3c', 'w5a w5b data w5d tool'] }],
    });
    expect(r.status).toBe(200);
    const out = Object.fromEntries(r.body.outputs.map((t: any) => [t.name, t]));
    const want = await textNet.predict(textNet.textVectorizer!.transform(['w3a the w3b package w3c', 'w5a w5b data w5d tool']), { k: 2, workers: 0 });
    expect(checkTensor(out.labels, true)).toEqual(Array.from(want.labels));
    expect(checkTensor(out.label_names, true)).toEqual(Array.from(want.labels, (l) => textNet.labelNames![l]));
    const th = await call(numeric, 'POST', '/v2/models/tiny/infer', {
      parameters: { k: 4, threshold: 0.99 }, inputs: [{ name: 'features', shape: [1, train.features], datatype: 'FP32', data: new Array(train.features).fill(0) }],
    });
    expect(th.status).toBe(200);
    const labels = th.body.outputs.find((t: any) => t.name === 'labels');
    expect(labels.shape).toEqual([1, 4]);
    expect(labels.data.filter((l: number) => l === -1).length).toBeGreaterThan(0);
  });

  it('bad requests: 400 and {"error": string} that says what is wrong', async () => {
    const f = { name: 'features', shape: [1, train.features], datatype: 'FP32', data: new Array(train.features).fill(0) };
    const cases: [unknown, RegExp][] = [
      ['{"inputs": [', /^invalid JSON/],
      [{}, /non-empty array for "inputs"/],
      [{ inputs: [{ ...f, shape: [1, 3] }] }, /holds 3 elements but "data" holds/],
      [{ inputs: [{ ...f, datatype: 'BYTES' }] }, /expected a numeric datatype/],
      [{ inputs: [{ name: 'pixels', shape: [1], datatype: 'FP32', data: [1] }] }, /expected the inputs "features", or "indices", "values" and "offsets"/],
      [{ inputs: [f], outputs: [{ name: 'embedding' }] }, /unknown output "embedding"/],
      [{ inputs: [f], parameters: { k: 0 } }, /parameter "k"/],
      [{ inputs: [f], parameters: { temperature: 1 } }, /unknown parameter "temperature"/],
      [{ inputs: [{ name: 'text', shape: [1], datatype: 'BYTES', data: ['x'] }] }, /this model was not trained on text/],
      [{ id: 7, inputs: [f] }, /string for "id"/],
    ];
    for (const [body, msg] of cases) {
      const r = await call(numeric, 'POST', '/v2/models/tiny/infer', body);
      expect(r.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(Object.keys(r.body)).toEqual(['error']);
      expect(r.body.error).toMatch(msg);
    }
  });
});
