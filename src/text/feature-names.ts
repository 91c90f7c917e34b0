// The words behind a text model's input features, for explanations (src/network/explain.ts): a feature of a
// vocabulary is its token (a word, or two words and a space for a bigram); a hashed feature is a bucket that
// many tokens share, named by the tokens of the explained text that fall in it.
import { tokenize } from './tokenize.js';
import type { TextVectorizer } from './vectorizer.js';

/**
 * The token(s) of each feature id in `features`: the vocabulary's token, or (hashing) the tokens of `text`
 * that map to it, joined by ' | '; null when none is known (a hashed feature and no text).
 */
export function featureTokens(v: TextVectorizer, features: readonly number[], text?: string): (string | null)[] {
  if (v.mode === 'vocabulary') return features.map((f) => v.vocabulary[f] ?? null);
  const byFeature = new Map<number, string[]>();
  if (text !== undefined) {
    for (const t of new Set(tokenize(text, v.options.bigrams))) {
      const f = v.featureOf(t);
      if (f < 0) continue;
      const list = byFeature.get(f);
      if (list) list.push(t);
      else byFeature.set(f, [t]);
    }
  }
  return features.map((f) => byFeature.get(f)?.join(' | ') ?? null);
}
