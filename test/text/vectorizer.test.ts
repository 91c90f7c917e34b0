// TextVectorizer against a plain reference of its formulas: tokens, vocabulary and minDf, tf-idf weights
// with sublinear tf, L2 rows, hashing above the vocabulary cap (xxhash32 of the token), and the parts a
// model file stores.
import { describe, expect, it } from 'vitest';
import xxhash from 'xxhash-wasm';
import { tokenize } from '../../src/text/tokenize.js';
import { TextVectorizer } from '../../src/text/vectorizer.js';
import { LabelNames, labelledDataset } from '../../src/text/labels.js';

const TEXTS = ['Red apples, GREEN apples', 'green pears', 'Red cars and red apples', 'blue sky'];

describe('tokenize', () => {
  it('lowercases with Unicode rules and splits on anything but letters, marks and digits', () => {
    expect(tokenize('Grüße, WORLD-wide! ΣΟΦΙΑ İstanbul naïve café 3d')).toEqual(['grüße', 'world', 'wide', 'σοφια', 'i̇stanbul', 'naïve', 'café', '3d']);
    expect(tokenize('日本語 テキスト')).toEqual(['日本語', 'テキスト']);
    expect(tokenize('  ...  ')).toEqual([]);
  });
  it('pure-ASCII text takes a character scan: the same tokens as the expression, with or without one other character', () => {
    // The definition itself: the regular expression over the lowercased text, then the bigrams.
    const reference = (text: string, bigrams = false) => {
      const words = text.toLowerCase().match(/[\p{L}\p{M}\p{N}]+/gu) ?? [];
      return bigrams ? [...words, ...words.slice(1).map((w, i) => `${words[i]} ${w}`)] : words;
    };
    expect(tokenize('libfoo1-dev: C++ headers (v2.0_beta)')).toEqual(['libfoo1', 'dev', 'c', 'headers', 'v2', '0', 'beta']);
    let x = 7;
    const rand = (n: number) => ((x = (Math.imul(x, 1103515245) + 12345) >>> 0) % n);
    for (let t = 0; t < 2000; t++) {
      let s = '';
      for (let i = 0, len = rand(60); i < len; i++) s += String.fromCharCode(rand(128));
      expect(tokenize(s), JSON.stringify(s)).toEqual(reference(s));
      expect(tokenize(s, true)).toEqual(reference(s, true));
      const at = rand(s.length + 1);
      const u = s.slice(0, at) + 'ÉİΣ\u0301'[t % 4] + s.slice(at);
      expect(tokenize(u), JSON.stringify(u)).toEqual(reference(u));
    }
  });
  it('adds the bigrams of neighbouring words after the words', () => {
    expect(tokenize('open source software', true)).toEqual(['open', 'source', 'software', 'open source', 'source software']);
    expect(tokenize('one', true)).toEqual(['one']);
  });
});

/** Reference tf-idf of one text over a vocabulary map. */
function reference(text: string, ids: Map<string, number>, idf: (t: string) => number): Map<number, number> {
  const tf = new Map<string, number>();
  for (const t of tokenize(text)) if (ids.has(t)) tf.set(t, (tf.get(t) ?? 0) + 1);
  const w = new Map<number, number>();
  let norm = 0;
  for (const [t, c] of tf) {
    const x = (1 + Math.log(c)) * idf(t);
    w.set(ids.get(t)!, x);
    norm += x * x;
  }
  for (const [j, x] of w) w.set(j, x / Math.sqrt(norm));
  return w;
}

describe('TextVectorizer', () => {
  it('keeps the tokens of at least minDf texts, in code-unit order, with smooth idf and sublinear tf, rows of norm 1', () => {
    const v = TextVectorizer.fit(TEXTS);
    expect(v.mode).toBe('vocabulary');
    expect(v.vocabulary).toEqual(['apples', 'green', 'red']); // df >= 2 (default minDf)
    expect(v.features).toBe(3);
    const N = 4;
    const df: Record<string, number> = { apples: 2, green: 2, red: 2 };
    const idf = (t: string) => Math.log((1 + N) / (1 + df[t]!)) + 1;
    const x = v.transform(TEXTS);
    expect(x.points).toBe(4);
    expect(x.labels).toBe(0);
    expect(Array.from(x.labelOffsets)).toEqual([0, 0, 0, 0, 0]);
    const ids = new Map(v.vocabulary.map((t, i) => [t, i]));
    for (let i = 0; i < TEXTS.length; i++) {
      const want = reference(TEXTS[i]!, ids, idf);
      const got = new Map<number, number>();
      for (let q = x.offsets[i]!; q < x.offsets[i + 1]!; q++) got.set(x.indices[q]!, x.values[q]!);
      expect([...got.keys()]).toEqual([...want.keys()].sort((a, b) => a - b));
      for (const [j, w] of want) expect(got.get(j)).toBeCloseTo(w, 6);
    }
    expect(x.offsets[4]! - x.offsets[3]!).toBe(0); // 'blue sky': no known token, empty row
  });

  it('does not depend on the order of the texts', () => {
    const a = TextVectorizer.fit(TEXTS, { minDf: 1 });
    const b = TextVectorizer.fit([...TEXTS].reverse(), { minDf: 1 });
    expect(b.vocabulary).toEqual(a.vocabulary);
    expect(b.idf).toEqual(a.idf);
  });

  it('hashes above maxVocabulary: feature = xxhash32(token) mod 2^hashBits, bucket df = sum of its tokens', async () => {
    const { h32 } = await xxhash();
    const v = TextVectorizer.fit(TEXTS, { minDf: 1, maxVocabulary: 3, hashBits: 12, bigrams: true });
    expect(v.mode).toBe('hashing');
    expect(v.features).toBe(4096);
    const x = v.transform(['red apples']);
    const want = [...new Set(['red', 'apples', 'red apples'].map((t) => h32(t) % 4096))].sort((a, b) => a - b);
    expect(Array.from(x.indices)).toEqual(want);
    let norm = 0;
    for (const w of x.values) norm += w * w;
    expect(norm).toBeCloseTo(1, 6);
    // A token never seen in training falls in a bucket of df 0: dropped.
    expect(v.featureOf('zebra')).toBe(v.idf[h32('zebra') % 4096]! > 0 ? h32('zebra') % 4096 : -1);
  });

  it('round-trips through the parts a model file stores', () => {
    for (const opts of [{ minDf: 1 }, { minDf: 1, maxVocabulary: 2, hashBits: 8 }]) {
      const v = TextVectorizer.fit(TEXTS, opts);
      const p = v.toParts();
      const w = TextVectorizer.fromParts(JSON.parse(JSON.stringify(p.meta)), p.vocabulary, p.idf);
      expect(w.transform(TEXTS)).toEqual(v.transform(TEXTS));
      expect(w.options).toEqual(v.options);
    }
    const p = TextVectorizer.fit(TEXTS, { minDf: 1 }).toParts();
    expect(() => TextVectorizer.fromParts({ ...p.meta, features: 99 }, p.vocabulary, p.idf)).toThrow(`invalid text vectorizer: ${p.idf.length} idf weights for 99 features`);
    expect(() => TextVectorizer.fromParts(p.meta, p.vocabulary.subarray(0, p.vocabulary.length - 1), p.idf)).toThrow('invalid text vectorizer: the vocabulary does not end with a line break');
  });

  it('refuses bad options and inputs word for word', () => {
    expect(() => TextVectorizer.fit(TEXTS, { minDf: 0 })).toThrow('Expected positive integer for minDf but received 0');
    expect(() => TextVectorizer.fit(TEXTS, { hashBits: 27 })).toThrow('Expected integer in [1, 26] for hashBits but received 27');
    expect(() => TextVectorizer.fit(TEXTS, { bigrams: 'yes' as never })).toThrow('Expected boolean for bigrams but received "yes"');
    expect(() => TextVectorizer.fit([])).toThrow('Cannot fit a TextVectorizer on 0 texts');
    expect(() => TextVectorizer.fit(TEXTS).transform([3 as never])).toThrow('Expected string for text 0 but received number');
  });
});

describe('labelledDataset', () => {
  it('gives names ids in order of appearance, grows for training data and drops unknown names of test data', () => {
    const v = TextVectorizer.fit(TEXTS, { minDf: 1 });
    const names = new LabelNames(['old']);
    const train = labelledDataset({ points: 2, texts: ['red', 'green'], labels: [['b', 'a', 'b'], ['old', 'c']], lines: Uint32Array.of(1, 2) }, v, names, true);
    expect(names.names).toEqual(['old', 'b', 'a', 'c']);
    expect(train.dataset.labels).toBe(4);
    expect(Array.from(train.dataset.labelIndices)).toEqual([1, 2, 0, 3]);
    expect(Array.from(train.dataset.labelOffsets)).toEqual([0, 2, 4]);
    const test = labelledDataset({ points: 1, texts: ['red'], labels: [['zzz', 'a']], lines: Uint32Array.of(1) }, v, names, false);
    expect(test.unknownLabels).toBe(1);
    expect(Array.from(test.dataset.labelIndices)).toEqual([2]);
    expect(names.size).toBe(4);
  });
});
