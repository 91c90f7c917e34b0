// Seeded raw-text points for the text tests: label `topic<j>` has its own words (`w<j>a` ... `w<j>e`), every
// text mixes 3 of its label's words with 3 shared filler words, so the labels are learnable from text.
import { Xoshiro128 } from '../../src/util/rng.js';

const FILLER = ['the', 'and', 'package', 'module', 'for', 'with', 'data', 'tool'];

/** `points` lines `topic<j><TAB>text`, labels j in [from, to). */
export function topicLines(points: number, from: number, to: number, seed: number): string[] {
  const rng = new Xoshiro128(seed);
  const lines: string[] = [];
  for (let i = 0; i < points; i++) {
    const j = from + rng.below(to - from);
    const words: string[] = [];
    for (let w = 0; w < 3; w++) words.push(`w${j}${'abcde'[rng.below(5)]}`, FILLER[rng.below(FILLER.length)]!);
    lines.push(`topic${j}\t${words.join(' ')}`);
  }
  return lines;
}
