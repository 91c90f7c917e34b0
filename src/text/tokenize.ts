// Tokenisation of raw text for TextVectorizer: Unicode-aware lowercasing (String.prototype.toLowerCase,
// the full Unicode case mapping), then word tokens = maximal runs of letters, combining marks and digits
// in any script (\p{L}\p{M}\p{N}); everything else (spaces, punctuation, symbols) separates tokens.
// Optional word bigrams join two neighbouring tokens with a space ("open source"), which no word token holds.

const WORD = /[\p{L}\p{M}\p{N}]+/gu;

/**
 * The tokens of `text` in order, words then (when `bigrams`) the bigrams of neighbouring words.
 *
 * @example
 * ```ts
 * tokenize('Grüße, WORLD-wide!', true); // ['grüße', 'world', 'wide', 'grüße world', 'world wide']
 * ```
 */
export function tokenize(text: string, bigrams = false): string[] {
  const words = text.toLowerCase().match(WORD) ?? [];
  if (!bigrams || words.length < 2) return words;
  const out = words.slice();
  for (let i = 1; i < words.length; i++) out.push(`${words[i - 1]} ${words[i]}`);
  return out;
}
