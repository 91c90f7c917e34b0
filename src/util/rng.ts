// Deterministic random numbers: splitmix64 over BigInt-free 32-bit halves would be awkward, so we keep
// the state as a BigInt (only used for parameter generation, never on a hot path).
// The same generator exists in C++ (native/rng.h) for per-call streams.

const MASK64 = (1n << 64n) - 1n;

/** splitmix64 generator. `next()` returns a 64-bit BigInt; `nextU32()` its high 32 bits. */
export class SplitMix64 {
  private state: bigint;
  constructor(seed: number | bigint) {
    this.state = BigInt.asUintN(64, BigInt(seed));
  }
  next(): bigint {
    this.state = (this.state + 0x9e3779b97f4a7c15n) & MASK64;
    let z = this.state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK64;
    return z ^ (z >> 31n);
  }
  /** Uniform 32-bit unsigned integer. */
  nextU32(): number {
    return Number(this.next() >> 32n);
  }
  /** Uniform integer in [0, n) for n <= 2^32 (Lemire's multiply-shift, unbiased enough for params). */
  below(n: number): number {
    return Number((BigInt(this.nextU32()) * BigInt(n)) >> 32n);
  }
  /** Uniform float in [0, 1) with 53 bits. */
  nextFloat(): number {
    return Number(this.next() >> 11n) / 2 ** 53;
  }
}

/** Fast 32-bit generator for bulk work in TS (data generation, shuffles): xoshiro128** seeded by splitmix64. */
export class Xoshiro128 {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;
  constructor(seed: number | bigint) {
    const sm = new SplitMix64(seed);
    const a = sm.next(), b = sm.next();
    this.s0 = Number(a & 0xffffffffn) | 0;
    this.s1 = Number(a >> 32n) | 0;
    this.s2 = Number(b & 0xffffffffn) | 0;
    this.s3 = Number(b >> 32n) | 0;
    if ((this.s0 | this.s1 | this.s2 | this.s3) === 0) this.s0 = 1;
  }
  nextU32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5), 7), 9) >>> 0;
    const t = this.s1 << 9;
    this.s2 ^= this.s0;
    this.s3 ^= this.s1;
    this.s1 ^= this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = rotl(this.s3, 11);
    return result;
  }
  /** Uniform float in [0, 1) with 32 bits. */
  nextFloat(): number {
    return this.nextU32() / 4294967296;
  }
  /** The state (s0, s1, s2, s3) as unsigned words: a native loop continues the stream from it (netGlorotFill). */
  words(): Uint32Array {
    return Uint32Array.of(this.s0 >>> 0, this.s1 >>> 0, this.s2 >>> 0, this.s3 >>> 0);
  }
  /** Uniform integer in [0, n), n <= 2^32. */
  below(n: number): number {
    return Math.floor(this.nextFloat() * n);
  }
  /** Standard normal (Box-Muller). */
  normal(): number {
    let u = this.nextFloat();
    if (u < 1e-300) u = 1e-300;
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * this.nextFloat());
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}

/** Fisher-Yates shuffle in place. */
export function shuffleInPlace(a: Uint32Array, rng: Xoshiro128): Uint32Array {
  for (let i = a.length - 1; i > 0; i--) {
    const j = rng.below(i + 1);
    const t = a[i]!;
    a[i] = a[j]!;
    a[j] = t;
  }
  return a;
}
