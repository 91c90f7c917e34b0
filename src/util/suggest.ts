// Did-you-mean hints and strict key checks, shared by the argument parser (unknown flags) and the
// configuration validators (unknown keys in a config object or file): a typo is an error that names
// the nearest known name, never an option silently ignored.

import { boundText } from './bounded-text.js';

/** ` (did you mean <prefix><name>?)` for the nearest known name within edit distance 2, else ''. */
export function suggest(name: string, known: readonly string[], prefix: string): string {
  let best: string | undefined;
  let bestD = 3;
  for (const k of known) {
    const d = editDistance(name.toLowerCase(), k.toLowerCase());
    if (d < bestD) {
      bestD = d;
      best = k;
    }
  }
  return best ? ` (did you mean ${prefix}${best}?)` : '';
}

/** Levenshtein distance (insertions, deletions, substitutions). */
export function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diag = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const up = row[j]!;
      row[j] = Math.min(up + 1, row[j - 1]! + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
      diag = up;
    }
  }
  return row[b.length]!;
}

/**
 * Throws `makeError(message)` for the first key of `obj` not in `known`, naming its path
 * (`layers[0].activaton`) and the nearest known key. `where` is the path of `obj` ('' at the top).
 * `hints` maps known misplacements to a sentence (e.g. a training option written inside a layer).
 */
export function checkKnownKeys(
  obj: object,
  known: readonly string[],
  where: string,
  makeError: (message: string) => Error,
  hints: Readonly<Record<string, string>> = {},
): void {
  for (const k of Object.keys(obj)) {
    if (known.includes(k)) continue;
    const shown = where ? `${where}.${boundText(k)}` : boundText(k);
    const hint = Object.hasOwn(hints, k) ? ` (${hints[k]})` : suggest(k, known, where ? `${where}.` : '');
    throw makeError(`Unknown option ${shown}${hint}`);
  }
}
