// Explanations (src/network/explain.ts): the contributions of a point's features plus the biases' share add
// up to the explained score, that score is the kernels' own (two labels' scores differ by the log of the
// ratio of the probabilities predict() returns), the gradient part is the gradient (finite differences of
// the ReLU/linear network), and on a text model the top tokens matter: removing a label's top-5 tokens
// from the text lowers its score and its probability.
import { describe, expect, it } from 'vitest';
import { Network } from '../../src/network/network.js';
import { explainLabels } from '../../src/network/explain.js';
import { subset, synthesize } from '../../src/datasets/index.js';
import { sharedFloat32 } from '../../src/datasets/csr.js';
import { TextVectorizer } from '../../src/text/vectorizer.js';
import { LabelNames, labelledDataset } from '../../src/text/labels.js';
import { parseTextLine, type TextData } from '../../src/datasets/text-reader.js';
import { featureTokens } from '../../src/text/feature-names.js';
import { tokenize } from '../../src/text/tokenize.js';
import { topicLines } from '../text/synthetic-text.js';
import { fit } from '../../src/train/fit-network.js';

/** Tiny synthetic points with raw values (up to ~60), so that the model's input scaling applies. */
function rawData(points: number, seed: number) {
  const d = synthesize({ shape: 'tiny', points, seed });
  const values = sharedFloat32(d.values.length);
  for (let e = 0; e < values.length; e++) values[e] = d.values[e]! * (3 + (d.indices[e]! % 20) * 3);
  return { ...d, values };
}

async function trainedNet(): Promise<{ net: Network; test: ReturnType<typeof rawData> }> {
  const all = rawData(2300, 12);
  const train = subset(all, Uint32Array.from({ length: 2000 }, (_, i) => i));
  const test = subset(all, Uint32Array.from({ length: 300 }, (_, i) => 2000 + i));
  const net = new Network({
    inputDim: all.features, seed: 4,
    layers: [
      { size: 24, activation: 'relu' },
      { size: 12, activation: 'linear' },
      { size: all.labels, wide: { init: 0.5 }, rerank: { weight: 2, shortlist: 8 } },
    ],
  });
  await fit(net, train, { epochs: 4, workers: 0 });
  return { net, test };
}

describe('explanations', () => {
  it("contributions plus the biases' share add up to the score, and scores differ as the kernels' log-probabilities do (wide part, re-ranker, input scaling)", async () => {
    const { net, test } = await trainedNet();
    expect(net.inputScale).not.toBeNull();
    expect(net.rerank?.weight).toBe(2);
    expect(net.spec.layers.at(-1)!.wide!.labels.length).toBeGreaterThan(0);
    const { predictions: p, explanations } = await net.explain(test, { k: 5, top: 1000, workers: 0 });
    let parts = { network: 0, wide: 0, rerank: 0 };
    for (let i = 0; i < test.points; i++) {
      const ex = explanations[i]!;
      expect(ex.map((e) => e.label)).toEqual(Array.from(p.labels.subarray(i * 5, i * 5 + 5)));
      for (const e of ex) {
        // Every feature is listed (top 1000): their sum and the bias are the score.
        expect(e.features).toHaveLength(test.offsets[i + 1]! - test.offsets[i]!);
        expect(e.rest).toBe(0);
        const sum = e.features.reduce((t, c) => t + c.contribution, e.bias);
        expect(sum).toBeCloseTo(e.score, 9);
        for (const c of e.features) {
          expect(c.contribution).toBeCloseTo(c.network + c.wide + c.rerank, 12);
          parts = { network: parts.network + Math.abs(c.network), wide: parts.wide + Math.abs(c.wide), rerank: parts.rerank + Math.abs(c.rerank) };
        }
        // The kernels' probabilities: log(p_first / p_this) = score_first - score_this.
        const r = ex.indexOf(e);
        expect(ex[0]!.score - e.score).toBeCloseTo(Math.log(p.scores[i * 5]! / p.scores[i * 5 + r]!), 3);
      }
    }
    // All three parts take part.
    expect(Math.min(parts.network, parts.wide, parts.rerank)).toBeGreaterThan(0);
    // top n keeps the n largest, the rest summed.
    const three = explainLabels(net, { indices: test.indices.subarray(test.offsets[0]!, test.offsets[1]!), values: test.values.subarray(test.offsets[0]!, test.offsets[1]!) }, [explanations[0]![0]!.label], 3)[0]!;
    const all = [...explanations[0]![0]!.features].sort((a, b) => b.contribution - a.contribution);
    expect(three.features).toEqual(all.slice(0, 3));
    expect(three.rest).toBeCloseTo(all.slice(3).reduce((t, c) => t + c.contribution, 0), 9);
  }, 120_000);

  it('a model whose inputs are term counts (compressed, 1 + ln n): the explained scores are the kernels\' own', async () => {
    const d = synthesize({ shape: 'tiny', points: 1300, seed: 5 });
    const values = sharedFloat32(d.values.length);
    for (let e = 0; e < values.length; e++) values[e] = 1 + (d.indices[e]! % 7); // counts 1..7
    const all = { ...d, values };
    const train = subset(all, Uint32Array.from({ length: 1200 }, (_, i) => i));
    const test = subset(all, Uint32Array.from({ length: 60 }, (_, i) => 1200 + i));
    const net = new Network({ inputDim: all.features, seed: 3, layers: [{ size: 16 }, { size: all.labels, wide: { init: 0.5 } }] });
    await fit(net, train, { epochs: 2, workers: 0, inputScaling: 'log' });
    expect(net.inputLog).toBe(true);
    const { predictions: p, explanations } = await net.explain(test, { k: 3, top: 1000, workers: 0 });
    for (let i = 0; i < test.points; i++) {
      const ex = explanations[i]!;
      for (let r = 0; r < ex.length; r++) {
        expect(ex[r]!.features.reduce((t, c) => t + c.contribution, ex[r]!.bias)).toBeCloseTo(ex[r]!.score, 9);
        expect(ex[0]!.score - ex[r]!.score).toBeCloseTo(Math.log(p.scores[i * 3]! / p.scores[i * 3 + r]!), 3);
      }
    }
  }, 120_000);

  it('the network and wide parts are gradient x input: finite differences of the score agree', async () => {
    const { net, test } = await trainedNet();
    net.rerank = null; // the re-ranker reads the unit-length row: its share is exact at the row's norm, not a gradient
    let checked = 0;
    for (let i = 0; i < 20; i++) {
      const lo = test.offsets[i]!, hi = test.offsets[i + 1]!;
      const indices = Array.from(test.indices.subarray(lo, hi)), values = Array.from(test.values.subarray(lo, hi));
      const label = (await net.predict(subset(test, Uint32Array.of(i)), { k: 1, workers: 0 })).labels[0]!;
      const base = explainLabels(net, { indices, values }, [label], 1000)[0]!;
      for (const c of base.features) {
        const q = indices.indexOf(c.feature);
        const h = 1e-4 * values[q]!;
        const moved = values.slice();
        moved[q] = values[q]! + h;
        const up = explainLabels(net, { indices, values: moved }, [label], 0)[0]!.score;
        // d score / d value = contribution / value (the contribution is value x derivative).
        expect((up - base.score) / h).toBeCloseTo(c.contribution / values[q]!, 3);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(100);
  }, 120_000);

  it('a text model explains with tokens, and removing a label\'s top-5 tokens lowers its score and its probability', async () => {
    const lines = topicLines(1500, 0, 12, 3);
    const parsed = lines.map((l, i) => parseTextLine(l, 'mem', i + 1));
    const train: TextData = { points: lines.length, texts: parsed.map((p) => p.text), labels: parsed.map((p) => p.labels), lines: Uint32Array.from(lines, (_, i) => i + 1) };
    const v = TextVectorizer.fit(train.texts);
    const names = new LabelNames();
    const d = labelledDataset(train, v, names, true).dataset;
    const net = new Network({ inputDim: v.features, seed: 2, layers: [{ size: 32 }, { size: names.size, wide: { init: 0.5 } }] });
    net.textVectorizer = v;
    net.labelNames = names.names;
    await fit(net, d, { epochs: 6, workers: 0 });
    let lowered = 0, tried = 0;
    for (const j of [0, 3, 7, 11]) {
      // A text of label j: three of its words, repeated once, amid filler.
      const text = `the w${j}a package w${j}b data module w${j}c tool w${j}a for with`;
      const rows = v.transform([text]);
      const { predictions, explanations } = await net.explain(rows, { k: 1, top: 5, workers: 0 });
      const e = explanations[0]![0]!;
      expect(names.names[e.label]).toBe(`topic${j}`);
      const tokens = featureTokens(v, e.features.map((c) => c.feature), text);
      expect(tokens.every((t) => typeof t === 'string' && tokenize(text).includes(t))).toBe(true);
      const removed = new Set(tokens as string[]);
      const rest = tokenize(text).filter((t) => !removed.has(t)).join(' ');
      const after = v.transform([rest]);
      const e2 = explainLabels(net, { indices: after.indices, values: after.values }, [e.label], 0)[0]!;
      const all = await net.predict(after, { k: names.size, workers: 0 });
      const pAfter = all.scores[Array.from(all.labels).indexOf(e.label)]!;
      tried++;
      if (e2.score < e.score && pAfter < predictions.scores[0]!) lowered++;
    }
    expect(lowered).toBe(tried);
  }, 120_000);
});
