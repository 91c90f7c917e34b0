// TextVectorizer: raw text -> tf-idf rows in the CSR layout of src/datasets/csr.ts.
//
// fit() tokenises the training texts (src/text/tokenize.ts), counts each token's document frequency (df)
// and keeps the tokens found in at least `minDf` documents. If they are at most `maxVocabulary`, each kept
// token gets a feature id (tokens in code-unit order: ids do not depend on the order of the texts) and
// tokens outside the vocabulary are ignored by transform(). Above the cap the vectorizer hashes: a token's
// feature is xxhash32(token UTF-8, seed 0) mod 2^hashBits, and a bucket's df is the sum of the dfs of the
// kept tokens that fall in it (capped at the number of documents); buckets whose df is below `minDf` are
// dropped, as are the rare tokens' vocabulary entries.
//
// Weights (scikit-learn's TfidfVectorizer with smooth_idf and sublinear_tf): for a token of count tf in a
// text, w = (1 + ln tf) * idf, idf = ln((1 + N) / (1 + df)) + 1 with N the training documents; each row is
// then divided by its L2 norm (a row with no known token stays empty).
import { sharedFloat32, sharedUint32, type SparseDataset } from '../datasets/csr.js';
import { tokenize } from './tokenize.js';
import { xxh32 as h32 } from '../util/xxhash32.js';

/** Word ids below 2^26 make a bigram's key first * 2^26 + second an exact float64 integer. */
const PAIR_SHIFT = 2 ** 26;

/** Document frequencies counted one id at a time: df[id], and the last text that counted it. */
class DfCounter {
  df: number[] = [];
  private last: number[] = [];
  add(id: number, doc: number): void {
    if (id === this.df.length) {
      this.df.push(1);
      this.last.push(doc);
    } else if (this.last[id] !== doc) {
      this.df[id]!++;
      this.last[id] = doc;
    }
  }
}

/** Options of `TextVectorizer.fit`. */
export interface TextVectorizerOptions {
  /** Keep only tokens found in at least this many training texts. Default 2. */
  minDf?: number;
  /** Also use the bigrams of neighbouring words as tokens. Default false. */
  bigrams?: boolean;
  /**
   * Largest vocabulary given one feature per token; a training set with more kept tokens is hashed into
   * 2^hashBits features instead. Default 200000.
   */
  maxVocabulary?: number;
  /** Hashing (above maxVocabulary): the feature space has 2^hashBits features (1..26: at most 67M features). Default 18. */
  hashBits?: number;
  /** tf weight 1 + ln(tf) (true) or the raw count tf (false). Default true. */
  sublinearTf?: boolean;
}

/** What a model file stores of a vectorizer besides its vocabulary and idf arrays (see `toParts`). */
export interface TextVectorizerMeta {
  minDf: number;
  bigrams: boolean;
  maxVocabulary: number;
  hashBits: number;
  sublinearTf: boolean;
  mode: 'vocabulary' | 'hashing';
  /** Training documents (N of the idf). */
  documents: number;
  /** Feature space size. */
  features: number;
  /** Tokens of the vocabulary (vocabulary mode; 0 when hashing). */
  tokens: number;
}

function positiveInt(v: unknown, what: string, max = 0xffffffff): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0 || v > max) {
    throw new Error(`Expected ${max === 0xffffffff ? 'positive integer' : `integer in [1, ${max}]`} for ${what} but received ${JSON.stringify(v)}`);
  }
  return v;
}

function resolveOptions(o: TextVectorizerOptions): Required<TextVectorizerOptions> {
  if (o === null || typeof o !== 'object') throw new Error(`Expected an options object but received ${JSON.stringify(o)}`);
  const bool = (v: unknown, what: string, d: boolean): boolean => {
    if (v === undefined) return d;
    if (typeof v !== 'boolean') throw new Error(`Expected boolean for ${what} but received ${JSON.stringify(v)}`);
    return v;
  };
  return {
    minDf: positiveInt(o.minDf ?? 2, 'minDf'),
    bigrams: bool(o.bigrams, 'bigrams', false),
    maxVocabulary: positiveInt(o.maxVocabulary ?? 200000, 'maxVocabulary'),
    hashBits: positiveInt(o.hashBits ?? 18, 'hashBits', 26),
    sublinearTf: bool(o.sublinearTf, 'sublinearTf', true),
  };
}

/**
 * Turns raw text into L2-normalised tf-idf rows (see the top of src/text/vectorizer.ts).
 *
 * @example
 * ```ts
 * const v = TextVectorizer.fit(['red apples', 'green apples', 'red cars'], { minDf: 1 });
 * const rows = v.transform(['red red apples']); // 1 row over v.features features, no labels
 * ```
 */
export class TextVectorizer {
  /** Feature space size: every feature id of transform() is < features. */
  readonly features: number;
  readonly options: Readonly<Required<TextVectorizerOptions>>;
  /** 'vocabulary' (one feature per kept token) or 'hashing' (above maxVocabulary). */
  readonly mode: 'vocabulary' | 'hashing';
  /** Training documents the idf was computed over. */
  readonly documents: number;
  /** (features) idf of each feature; 0 for a hashed bucket dropped by minDf. */
  readonly idf: Float32Array;
  /** Vocabulary mode: the tokens, index = feature id (empty when hashing). */
  readonly vocabulary: readonly string[];
  private readonly ids: Map<string, number>;
  /** Vocabulary mode with bigrams: each word's feature (-1: none) and id within the kept bigrams (-1: in none). */
  private readonly words = new Map<string, { feature: number; local: number }>();
  /** Vocabulary mode with bigrams: first local id * 2^26 + second local id -> the bigram's feature. */
  private readonly pairs = new Map<number, number>();
  /** transform()'s term counts, (features), all zero between calls: reused (transform is synchronous). */
  private count: Uint32Array | undefined;

  private constructor(options: Required<TextVectorizerOptions>, mode: 'vocabulary' | 'hashing', documents: number, idf: Float32Array, vocabulary: string[]) {
    this.options = Object.freeze({ ...options });
    this.mode = mode;
    this.documents = documents;
    this.idf = idf;
    this.vocabulary = vocabulary;
    this.features = idf.length;
    this.ids = new Map(vocabulary.map((t, i) => [t, i]));
    if (mode === 'vocabulary' && options.bigrams) {
      const word = (w: string) => {
        let e = this.words.get(w);
        if (!e) this.words.set(w, (e = { feature: -1, local: -1 }));
        return e;
      };
      let locals = 0;
      vocabulary.forEach((t, i) => {
        const space = t.indexOf(' ');
        if (space < 0) {
          word(t).feature = i;
          return;
        }
        const a = word(t.slice(0, space)), b = word(t.slice(space + 1));
        if (a.local < 0) a.local = locals++;
        if (b.local < 0) b.local = locals++;
        this.pairs.set(a.local * PAIR_SHIFT + b.local, i);
      });
    }
  }

  /** Builds the vocabulary (or the hashed feature space) and idf weights of `texts`. */
  static fit(texts: Iterable<string>, options: TextVectorizerOptions = {}): TextVectorizer {
    const o = resolveOptions(options);
    // Words get ids in order of appearance and bigrams the key (first id) * 2^26 + (second id): one map
    // lookup per word and per bigram, and a bigram's string is made only if it is kept.
    const wordIds = new Map<string, number>();
    const wordDf = new DfCounter();
    const pairIds = new Map<number, number>();
    const pairKeys: number[] = [];
    const pairDf = new DfCounter();
    let N = 0;
    for (const text of texts) {
      if (typeof text !== 'string') throw new Error(`Expected string for text ${N} but received ${typeof text}`);
      let prev = -1;
      for (const w of tokenize(text)) {
        let id = wordIds.get(w);
        if (id === undefined) {
          id = wordIds.size;
          if (id >= PAIR_SHIFT) throw new Error(`Cannot fit a TextVectorizer on more than ${PAIR_SHIFT} distinct words`);
          wordIds.set(w, id);
        }
        wordDf.add(id, N);
        if (o.bigrams && prev >= 0) {
          const key = prev * PAIR_SHIFT + id;
          let p = pairIds.get(key);
          if (p === undefined) {
            p = pairKeys.length;
            pairIds.set(key, p);
            pairKeys.push(key);
          }
          pairDf.add(p, N);
        }
        prev = id;
      }
      N++;
    }
    if (N === 0) throw new Error('Cannot fit a TextVectorizer on 0 texts');
    const wordList = [...wordIds.keys()];
    const df = new Map<string, number>();
    wordList.forEach((w, id) => {
      if (wordDf.df[id]! >= o.minDf) df.set(w, wordDf.df[id]!);
    });
    pairKeys.forEach((key, p) => {
      const a = Math.floor(key / PAIR_SHIFT), b = key - a * PAIR_SHIFT;
      if (pairDf.df[p]! >= o.minDf) df.set(`${wordList[a]} ${wordList[b]}`, pairDf.df[p]!);
    });
    const idfOf = (d: number) => Math.log((1 + N) / (1 + d)) + 1;
    const kept = [...df.keys()];
    if (kept.length <= o.maxVocabulary) {
      kept.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      const idf = new Float32Array(kept.length);
      kept.forEach((t, i) => (idf[i] = idfOf(df.get(t)!)));
      return new TextVectorizer(o, 'vocabulary', N, idf, kept);
    }
    const D = 2 ** o.hashBits;
    const bucketDf = new Float64Array(D);
    for (const t of kept) bucketDf[h32(t) & (D - 1)]! += df.get(t)!;
    const idf = new Float32Array(D);
    for (let j = 0; j < D; j++) {
      const d = Math.min(N, bucketDf[j]!);
      idf[j] = d >= o.minDf ? idfOf(d) : 0;
    }
    return new TextVectorizer(o, 'hashing', N, idf, []);
  }

  /** The feature id of a token (after lowercasing and tokenisation), or -1 when it has none. */
  featureOf(token: string): number {
    if (this.mode === 'vocabulary') return this.ids.get(token) ?? -1;
    const j = h32(token) & (this.features - 1);
    return this.idf[j]! > 0 ? j : -1;
  }

  /**
   * The tf-idf rows of `texts` on SharedArrayBuffers (labels: 0, every label list empty). Tokens without a
   * feature are ignored; a text with none gives an empty row.
   */
  transform(texts: readonly string[]): SparseDataset {
    if (!Array.isArray(texts)) throw new Error(`Expected an array of strings for texts but received ${typeof texts}`);
    const n = texts.length;
    const offsets = sharedUint32(n + 1);
    let idx = new Uint32Array(Math.max(16, n * 32));
    let val = new Float32Array(idx.length);
    let nnz = 0;
    // Term counts of one text: count[j] for the features in `touched` (reset after each text).
    const count = (this.count ??= new Uint32Array(this.features));
    let touched = new Uint32Array(256);
    const sub = this.options.sublinearTf;
    for (let i = 0; i < n; i++) {
      const text = texts[i];
      if (typeof text !== 'string') throw new Error(`Expected string for text ${i} but received ${typeof text}`);
      let m = 0;
      const add = (j: number) => {
        if (j < 0) return;
        if (count[j]++ === 0) {
          if (m === touched.length) {
            const bigger = new Uint32Array(m * 2);
            bigger.set(touched);
            touched = bigger;
          }
          touched[m++] = j;
        }
      };
      if (this.mode === 'vocabulary' && this.options.bigrams) {
        // Vocabulary with bigrams: a bigram is looked up by its words' ids, never built as a string.
        let prev = -1;
        for (const w of tokenize(text)) {
          const e = this.words.get(w);
          if (e) add(e.feature);
          const local = e ? e.local : -1;
          if (prev >= 0 && local >= 0) add(this.pairs.get(prev * PAIR_SHIFT + local) ?? -1);
          prev = local;
        }
      } else {
        for (const t of tokenize(text, this.options.bigrams)) add(this.featureOf(t));
      }
      if (nnz + m > idx.length) {
        const grow = Math.max(idx.length * 2, nnz + m);
        const i2 = new Uint32Array(grow), v2 = new Float32Array(grow);
        i2.set(idx.subarray(0, nnz));
        v2.set(val.subarray(0, nnz));
        idx = i2;
        val = v2;
      }
      const ids = touched.subarray(0, m).sort();
      let norm = 0;
      for (let q = 0; q < m; q++) {
        const j = ids[q]!, tf = count[j]!;
        const w = (sub ? 1 + Math.log(tf) : tf) * this.idf[j]!;
        norm += w * w;
        idx[nnz + q] = j;
        val[nnz + q] = w; // float32 of w, rescaled below from the float64 weights
      }
      const scale = norm > 0 ? 1 / Math.sqrt(norm) : 0;
      for (let q = 0; q < m; q++) {
        const j = ids[q]!, tf = count[j]!;
        val[nnz + q] = (sub ? 1 + Math.log(tf) : tf) * this.idf[j]! * scale;
        count[j] = 0;
      }
      nnz += m;
      offsets[i + 1] = nnz;
    }
    const indices = sharedUint32(nnz);
    indices.set(idx.subarray(0, nnz));
    const values = sharedFloat32(nnz);
    values.set(val.subarray(0, nnz));
    return { points: n, features: this.features, labels: 0, offsets, indices, values, labelOffsets: sharedUint32(n + 1), labelIndices: sharedUint32(0) };
  }

  /** What a model file stores: settings (JSON), the vocabulary (UTF-8 tokens, each followed by '\n') and the idf. */
  toParts(): { meta: TextVectorizerMeta; vocabulary: Uint8Array; idf: Float32Array } {
    const o = this.options;
    const meta: TextVectorizerMeta = {
      minDf: o.minDf, bigrams: o.bigrams, maxVocabulary: o.maxVocabulary, hashBits: o.hashBits, sublinearTf: o.sublinearTf,
      mode: this.mode, documents: this.documents, features: this.features, tokens: this.vocabulary.length,
    };
    const vocabulary = new TextEncoder().encode(this.vocabulary.length ? this.vocabulary.join('\n') + '\n' : '');
    return { meta, vocabulary, idf: this.idf };
  }

  /**
   * Rebuilds a vectorizer from `toParts()`; throws an Error describing the first inconsistency (a model
   * file's loader prefixes its path).
   */
  static fromParts(meta: TextVectorizerMeta, vocabulary: Uint8Array, idf: Float32Array): TextVectorizer {
    const problem = (m: string) => new Error(`invalid text vectorizer: ${m}`);
    if (meta === null || typeof meta !== 'object') throw problem('missing settings');
    let o: Required<TextVectorizerOptions>;
    try {
      o = resolveOptions(meta);
    } catch (e) {
      throw problem((e as Error).message);
    }
    if (meta.mode !== 'vocabulary' && meta.mode !== 'hashing') throw problem(`unknown mode ${JSON.stringify(meta.mode)}`);
    const documents = positiveInt(meta.documents, 'documents');
    if (idf.length !== meta.features) throw problem(`${idf.length} idf weights for ${meta.features} features`);
    for (let j = 0; j < idf.length; j++) if (!(idf[j]! >= 0 && Number.isFinite(idf[j]!))) throw problem(`idf ${idf[j]} of feature ${j} is not a finite non-negative number`);
    let tokens: string[] = [];
    if (meta.mode === 'hashing') {
      if (meta.features !== 2 ** o.hashBits) throw problem(`hashing into ${meta.features} features, not 2^${o.hashBits}`);
      if (vocabulary.length !== 0) throw problem('a hashing vectorizer has no vocabulary');
    } else {
      let text: string;
      try {
        text = new TextDecoder('utf-8', { fatal: true }).decode(vocabulary);
      } catch {
        throw problem('the vocabulary is not UTF-8');
      }
      tokens = text === '' ? [] : text.slice(0, -1).split('\n');
      if (text !== '' && !text.endsWith('\n')) throw problem('the vocabulary does not end with a line break');
      if (tokens.length !== meta.features || meta.tokens !== tokens.length) throw problem(`${tokens.length} vocabulary tokens for ${meta.features} features`);
      if (new Set(tokens).size !== tokens.length) throw problem('the vocabulary holds a token twice');
    }
    return new TextVectorizer(o, meta.mode, documents, idf, tokens);
  }
}
