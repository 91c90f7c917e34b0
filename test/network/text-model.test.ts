// Models trained on text: the vectorizer and label names survive save/load, files written before text
// models existed still load, and Network.grow adds outputs without touching the old ones.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Network } from '../../src/network/network.js';
import { readBinFile, writeBinFile } from '../../src/util/binfile.js';
import { TextVectorizer } from '../../src/text/vectorizer.js';
import { LabelNames, labelledDataset } from '../../src/text/labels.js';
import type { TextData } from '../../src/datasets/text-reader.js';
import { parseTextLine } from '../../src/datasets/text-reader.js';
import { topicLines } from '../text/synthetic-text.js';
import type { NetworkConfig } from '../../src/network/config.js';
import { fit } from '../../src/train/fit-network.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sublinear-textmodel-'));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

function textData(lines: string[]): TextData {
  const parsed = lines.map((l, i) => parseTextLine(l, 'mem', i + 1));
  return { points: lines.length, texts: parsed.map((p) => p.text), labels: parsed.map((p) => p.labels), lines: Uint32Array.from(lines, (_, i) => i + 1) };
}

const sampledOutput = (labels: number, inputDim: number): NetworkConfig => ({
  inputDim, seed: 5,
  layers: [
    { size: 32, activation: 'relu' },
    { size: labels, activation: 'softmax', sampling: { hash: 'dwta', K: 2, L: 8, budget: Math.min(24, labels), minActive: Math.min(8, labels), logQ: true } },
  ],
});

/** P@1 of `net` on `data` restricted to points whose label id is in [from, to). */
async function p1(net: Network, data: ReturnType<typeof labelledDataset>['dataset'], from: number, to: number, mode: 'exact' | 'sampled' = 'exact'): Promise<number> {
  const pred = await net.predict(data, { k: 1, workers: 0, mode });
  let hit = 0, n = 0;
  for (let i = 0; i < data.points; i++) {
    const l = data.labelIndices[data.labelOffsets[i]!]!;
    if (l < from || l >= to) continue;
    n++;
    if (pred.labels[i] === l) hit++;
  }
  return hit / n;
}

describe('text models in model files', () => {
  it('save and load keep the vectorizer and the label names', async () => {
    const train = textData(topicLines(300, 0, 10, 1));
    const v = TextVectorizer.fit(train.texts, { bigrams: true });
    const names = new LabelNames();
    const d = labelledDataset(train, v, names, true).dataset;
    const net = new Network(sampledOutput(names.size, v.features));
    await fit(net, d, { epochs: 2, workers: 0 });
    net.textVectorizer = v;
    net.labelNames = names.names;
    const path = join(dir, 'text.sl');
    await net.save(path);
    const back = await Network.load(path);
    expect(back.labelNames).toEqual(names.names);
    expect(back.textVectorizer!.options).toEqual(v.options);
    expect(back.textVectorizer!.transform(train.texts)).toEqual(v.transform(train.texts));
    const a = await net.predict(d, { k: 3, workers: 0 }), b = await back.predict(d, { k: 3, workers: 0 });
    expect(b.labels).toEqual(a.labels);
  });

  it('loads a model file written before text models existed (no text sections, no names)', async () => {
    const path = join(dir, 'old.sl');
    await copyFile(join(import.meta.dirname, 'fixtures/model-before-text.sl'), path);
    const net = await Network.load(path);
    expect(net.textVectorizer).toBeUndefined();
    expect(net.labelNames).toBeUndefined();
    // The fixture holds the initial weights of this configuration (seeded): compare them bit for bit.
    const fresh = new Network({ inputDim: 6, seed: 3, layers: [{ size: 4, activation: 'relu' }, { size: 3, activation: 'softmax' }] });
    net.spec.layers.forEach((l, k) => {
      expect(l.weights).toEqual(fresh.spec.layers[k]!.weights);
      expect(l.bias).toEqual(fresh.spec.layers[k]!.bias);
    });
  });

  it('refuses text sections that the meta does not announce, and names that do not match their count', async () => {
    const net = new Network({ inputDim: 6, seed: 3, layers: [{ size: 4, activation: 'relu' }, { size: 3, activation: 'softmax' }] });
    net.labelNames = ['a', 'b', 'c'];
    const path = join(dir, 'names.sl');
    await net.save(path);
    const f = await readBinFile<Record<string, unknown>>(path);
    const bad = join(dir, 'bad.sl');
    await writeBinFile(bad, { kind: 'model', meta: { ...f.meta, labelNames: 2 }, sections: f.sections });
    await expect(Network.load(bad)).rejects.toThrow(`${bad}: section "labelNames" does not hold 2 names`);
    const { labelNames: _, ...noCount } = f.meta;
    await writeBinFile(bad, { kind: 'model', meta: noCount, sections: f.sections });
    await expect(Network.load(bad)).rejects.toThrow(`${bad}: unexpected section "labelNames" for this model's meta`);
    await writeBinFile(bad, { kind: 'model', meta: { ...f.meta, labelNames: 4 }, sections: f.sections });
    await expect(Network.load(bad)).rejects.toThrow(`${bad}: invalid labelNames 4 in the model meta (the network has 3 labels)`);
  });
});

describe('Network.grow', () => {
  it('keeps every old row bit for bit (weights, biases, Adam moments, step counters) and leaves the original alone', async () => {
    for (const config of [sampledOutput(10, 40), { inputDim: 40, seed: 2, layers: [{ size: 10, activation: 'softmax' as const }] }]) {
      const net = new Network(config);
      await fit(net, hashedTopics(10), { epochs: 1, workers: 0 }); // moments and step counters become nonzero
      const before = net.spec.layers.map((l) => ({ w: l.weights.slice(), m: l.mWeights.slice(), v: l.vWeights.slice(), b: l.bias.slice(), s: l.rowSteps.slice() }));
      const g = net.grow(13, undefined);
      const last = net.spec.layers.length - 1;
      g.spec.layers.forEach((l, k) => {
        const o = net.spec.layers[k]!;
        if (k < last) {
          expect(l.weights).toEqual(o.weights);
          expect(l.mWeights).toEqual(o.mWeights);
          return;
        }
        expect(l.outDim).toBe(13);
        expect(l.bias.subarray(0, 10)).toEqual(o.bias);
        expect(Array.from(l.bias.subarray(10))).toEqual([0, 0, 0]);
        if (o.inputMajor) {
          for (let i = 0; i < o.inDim; i++) {
            expect(l.weights.subarray(i * 13, i * 13 + 10)).toEqual(o.weights.subarray(i * 10, i * 10 + 10));
            expect(l.vWeights.subarray(i * 13, i * 13 + 10)).toEqual(o.vWeights.subarray(i * 10, i * 10 + 10));
            expect(Array.from(l.mWeights.subarray(i * 13 + 10, i * 13 + 13))).toEqual([0, 0, 0]);
          }
        } else {
          expect(l.weights.subarray(0, o.weights.length)).toEqual(o.weights);
          expect(l.mWeights.subarray(0, o.weights.length)).toEqual(o.mWeights);
          expect(l.rowSteps.subarray(0, 10)).toEqual(o.rowSteps);
          expect(Array.from(l.rowSteps.subarray(10))).toEqual([0, 0, 0]);
          expect(Array.from(l.vWeights.subarray(o.weights.length)).every((x) => x === 0)).toBe(true);
        }
      });
      net.spec.layers.forEach((l, k) => expect(l.weights).toEqual(before[k]!.w));
      expect(g.config.layers.at(-1)!.size).toBe(13);
      expect(g.batchesDone).toBe(net.batchesDone);
      expect(() => net.grow(9)).toThrow('Expected integer >= 10 (the current labels) for labels but received 9');
    }
  });

  it('a grown network learns the new labels and keeps the old ones (names appended after the old)', async () => {
    const oldLines = topicLines(600, 0, 36, 11);
    const newLines = topicLines(300, 36, 40, 12);
    const oldData = textData(oldLines);
    const v = TextVectorizer.fit(oldData.texts, { minDf: 1 });
    const names = new LabelNames();
    const d0 = labelledDataset(oldData, v, names, true).dataset;
    expect(names.size).toBe(36);
    const net = new Network(sampledOutput(36, v.features));
    await fit(net, d0, { epochs: 6, workers: 0 });
    net.textVectorizer = v;
    net.labelNames = names.names.slice();
    const testOld = labelledDataset(textData(topicLines(200, 0, 36, 13)), v, names, false).dataset;
    const oldP1 = await p1(net, testOld, 0, 36);
    expect(oldP1).toBeGreaterThan(0.8); // observed 1.0

    // The new topics have words of their own, which a vectorizer fitted on the old text does not know: here
    // the vectorizer is fitted on all the text, the network trained on the old labels only, then grown.
    const all = textData([...oldLines, ...newLines]);
    const v2 = TextVectorizer.fit(all.texts, { minDf: 1 });
    expect(v2.features).toBeGreaterThan(v.features);
    const net2 = new Network(sampledOutput(36, v2.features));
    await fit(net2, labelledDataset(oldData, v2, new LabelNames(), true).dataset, { epochs: 6, workers: 0 });
    net2.labelNames = names.names.slice();
    const grownNames = new LabelNames(net2.labelNames);
    const more = labelledDataset(textData([...newLines, ...topicLines(300, 0, 36, 14)]), v2, grownNames, true).dataset;
    expect(grownNames.names.slice(0, 36)).toEqual(names.names);
    expect(grownNames.size).toBe(40);
    const grown = net2.grow(grownNames.size, grownNames.names);
    expect(grown.labelNames).toEqual(grownNames.names);
    await fit(grown, more, { epochs: 4, workers: 0 });
    const newTestLines = topicLines(200, 36, 40, 15);
    const testNew = labelledDataset(textData(newTestLines), v2, grownNames, false).dataset;
    expect(await p1(grown, testNew, 36, 40)).toBeGreaterThan(0.8); // observed 1.0
    expect(await p1(grown, testNew, 36, 40, 'sampled')).toBeGreaterThan(0.8); // cluster index rebuilt for 40 labels
    const testOld2 = labelledDataset(textData(topicLines(200, 0, 36, 13)), v2, grownNames, false).dataset;
    expect(await p1(grown, testOld2, 0, 36)).toBeGreaterThan(0.8);
    // Names map to the right outputs: the predicted name is the line's own label name.
    const pred = await grown.predict(testNew, { k: 1, workers: 0 });
    const right = newTestLines.filter((l, i) => grown.labelNames![pred.labels[i]!] === l.split('\t')[0]).length;
    expect(right / newTestLines.length).toBeGreaterThan(0.8);
  });
});

/** 120 topic points over 32 hashed features, labels topic0..topic<labels - 1>. */
function hashedTopics(labels: number) {
  const d = textData(topicLines(120, 0, labels, 21));
  return labelledDataset(d, TextVectorizer.fit(d.texts, { minDf: 1, maxVocabulary: 1, hashBits: 5 }), new LabelNames(), true).dataset;
}
