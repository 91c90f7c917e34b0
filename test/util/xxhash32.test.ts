// The synchronous XXH32 (src/util/xxhash32.ts) against xxhash-wasm's h32, which the text vectorizer used
// before: the same number for every string, so hashed vocabularies in existing model files keep their
// features. Lengths 0..80 cover the short path (< 16 bytes), the 16-byte stripes and every tail length;
// the texts mix ASCII, 2-, 3- and 4-byte UTF-8 and lone surrogates (TextEncoder writes U+FFFD for them).
import { describe, expect, it } from 'vitest';
import xxhash from 'xxhash-wasm';
import { Xoshiro128 } from '../../src/util/rng.js';
import { xxh32, xxh32Bytes } from '../../src/util/xxhash32.js';

const PIECES = ['a', 'Z', '0', ' ', 'é', 'ß', '€', '中', '😀', '\ud800', '\udc00', '\n', '\u0000'];

describe('xxh32', () => {
  it('matches the specification\'s published values', () => {
    // XXH32 test vectors: "" seed 0 = 0x02CC5D05; "a" = 0x550D7456; "abc" = 0x32D153FF.
    expect(xxh32('')).toBe(0x02cc5d05);
    expect(xxh32('a')).toBe(0x550d7456);
    expect(xxh32('abc')).toBe(0x32d153ff);
  });

  it('gives xxhash-wasm h32\'s numbers for 5,000 strings of 0..80 code units, and seeds', async () => {
    const { h32 } = await xxhash();
    const rng = new Xoshiro128(7);
    for (let n = 0; n < 5000; n++) {
      const len = n % 81;
      let s = '';
      while (s.length < len) s += PIECES[rng.nextU32() % PIECES.length]!;
      expect(xxh32(s), JSON.stringify(s)).toBe(h32(s));
      if (n % 50 === 0) expect(xxh32(s, 12345)).toBe(h32(s, 12345));
    }
    // A string longer than the reused scratch buffer.
    const long = 'token '.repeat(1000) + '中';
    expect(xxh32(long)).toBe(h32(long));
    expect(xxh32Bytes(new TextEncoder().encode(long))).toBe(h32(long));
  });
});
