// The fuzzers' randomness (bench/fuzz.ts, bench/fuzz-structured.ts): mulberry32 per case, seeded from
// (seed, index), so any case can be replayed on its own.
export class CaseRng {
  private a: number;
  constructor(seed: number, index: number) {
    let h = (Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(index + 1, 0xc2b2ae35)) >>> 0;
    h ^= h >>> 16;
    this.a = Math.imul(h, 0x7feb352d) >>> 0;
  }
  next(): number {
    this.a = (this.a + 0x6d2b79f5) >>> 0;
    let t = this.a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)]!;
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
}
