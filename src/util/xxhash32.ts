// xxHash32 (XXH32) of a string's UTF-8 bytes, synchronous and in plain TypeScript.
//
// The text vectorizer hashes tokens with it. It was xxhash-wasm's h32, whose module must be instantiated
// asynchronously: the top-level await that took made the package's module graph asynchronous, and
// require('sublinear') (require of an ES module, Node >= 20.19 / >= 22.12) refuses such a graph
// (ERR_REQUIRE_ASYNC_MODULE). This gives the same numbers (tested against xxhash-wasm), so hashed
// vocabularies in existing model files keep their features. Algorithm: the XXH32 specification
// (https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md), all arithmetic modulo 2^32.

const P1 = 0x9e3779b1, P2 = 0x85ebca77, P3 = 0xc2b2ae3d, P4 = 0x27d4eb2f, P5 = 0x165667b1;

const encoder = new TextEncoder();
/** Reused for the UTF-8 bytes of strings up to its size (3 bytes per UTF-16 code unit at most); grown when needed. */
let scratch = new Uint8Array(1024);

const rotl = (x: number, r: number) => (x << r) | (x >>> (32 - r));
const round = (acc: number, lane: number) => Math.imul(rotl((acc + Math.imul(lane, P2)) | 0, 13), P1);
const lane32 = (b: Uint8Array, i: number) => b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16) | (b[i + 3]! << 24);

/** XXH32 of bytes[0 .. len) with the given seed, as an unsigned 32-bit integer. */
export function xxh32Bytes(bytes: Uint8Array, len = bytes.length, seed = 0): number {
  let i = 0;
  let h: number;
  if (len >= 16) {
    let v1 = (seed + P1 + P2) | 0, v2 = (seed + P2) | 0, v3 = seed | 0, v4 = (seed - P1) | 0;
    for (const limit = len - 16; i <= limit; i += 16) {
      v1 = round(v1, lane32(bytes, i));
      v2 = round(v2, lane32(bytes, i + 4));
      v3 = round(v3, lane32(bytes, i + 8));
      v4 = round(v4, lane32(bytes, i + 12));
    }
    h = (rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18)) | 0;
  } else {
    h = (seed + P5) | 0;
  }
  h = (h + len) | 0;
  for (; i + 4 <= len; i += 4) h = Math.imul(rotl((h + Math.imul(lane32(bytes, i), P3)) | 0, 17), P4);
  for (; i < len; i++) h = Math.imul(rotl((h + Math.imul(bytes[i]!, P5)) | 0, 11), P1);
  h = Math.imul(h ^ (h >>> 15), P2);
  h = Math.imul(h ^ (h >>> 13), P3);
  return (h ^ (h >>> 16)) >>> 0;
}

/** XXH32 of the string's UTF-8 bytes (lone surrogates as U+FFFD, as TextEncoder writes them), seed 0 by default. */
export function xxh32(text: string, seed = 0): number {
  if (text.length * 3 > scratch.length) scratch = new Uint8Array(text.length * 3);
  const { written } = encoder.encodeInto(text, scratch);
  return xxh32Bytes(scratch, written, seed);
}
