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
  const lower = text.toLowerCase();
  const words = asciiWords(lower) ?? lower.match(WORD) ?? [];
  if (!bigrams || words.length < 2) return words;
  const out = words.slice();
  for (let i = 1; i < words.length; i++) out.push(`${words[i - 1]} ${words[i]}`);
  return out;
}

/**
 * The word tokens of lowercased `text` when it is pure ASCII (null otherwise): there, \p{L}\p{M}\p{N} are
 * exactly a-z and 0-9 (A-Z are gone after lowercasing), and a scan of the character codes finds the same
 * tokens as the regular expression in a third of the time (most raw text is ASCII). Any other character sends
 * the text back to the expression.
 */
function asciiWords(lower: string): string[] | null {
  const words: string[] = [];
  let start = -1;
  for (let i = 0, n = lower.length; i < n; i++) {
    const c = lower.charCodeAt(i);
    if (c >= 128) return null;
    if ((c >= 97 && c <= 122) || (c >= 48 && c <= 57)) {
      if (start < 0) start = i;
    } else if (start >= 0) {
      words.push(lower.slice(start, i));
      start = -1;
    }
  }
  if (start >= 0) words.push(lower.slice(start));
  return words;
}
