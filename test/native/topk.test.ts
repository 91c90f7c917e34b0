// The native top-k (topk.cc, behind every prediction's k best) against a sort: the same labels in the same
// order, ties to the smaller index (-0 and 0 are equal), NaN never ranked, short rows padded, on score orders
// that take its different paths (random, ascending, descending, all equal, few distinct values, rows shorter
// than 4k).
import { describe, expect, it } from 'vitest';
import { native } from '../../src/native/addon.js';
import { Xoshiro128 } from '../../src/util/rng.js';

const NONE = 0xffffffff;

function reference(row: Float32Array, k: number): { idx: number[]; val: number[] } {
  const order = [...row.keys()].filter((i) => !Number.isNaN(row[i]!));
  order.sort((a, b) => (row[b]! !== row[a]! ? row[b]! - row[a]! : a - b));
  const idx = order.slice(0, k);
  const val = idx.map((i) => (row[i] === 0 ? 0 : row[i]!)); // -0 is reported as 0
  while (idx.length < k) {
    idx.push(NONE);
    val.push(-Infinity);
  }
  return { idx, val };
}

function check(rows: Float32Array[], cols: number, k: number) {
  const scores = new Float32Array(rows.length * cols);
  rows.forEach((r, i) => scores.set(r, i * cols));
  const outIdx = new Uint32Array(rows.length * k), outVal = new Float32Array(rows.length * k);
  native().topK(scores, rows.length, cols, k, outIdx, outVal);
  rows.forEach((r, i) => {
    const want = reference(r, k);
    expect([...outIdx.subarray(i * k, (i + 1) * k)]).toEqual(want.idx);
    expect([...outVal.subarray(i * k, (i + 1) * k)]).toEqual(want.val);
  });
}

describe('topK', () => {
  const rng = new Xoshiro128(5);
  const random = (n: number, distinct = 0) =>
    Float32Array.from({ length: n }, () => (distinct ? Math.floor(rng.nextFloat() * distinct) : rng.nextFloat() * 2 - 1));

  it('equals a sort on random, ascending and descending rows, for k from 1 to more than the row', () => {
    for (const [cols, k] of [[1100, 32], [300, 1], [300, 7], [129, 32], [127, 32], [64, 32], [20, 32], [1000, 250]] as const) {
      const rows = [random(cols), random(cols), random(cols)];
      rows.push(Float32Array.from(random(cols)).sort());
      rows.push(Float32Array.from(random(cols)).sort().reverse());
      check(rows, cols, k);
    }
  });

  it('breaks ties by the smaller index, also across the buffer cuts', () => {
    const cols = 2000;
    const rows = [random(cols, 3), random(cols, 40), new Float32Array(cols).fill(0.5)];
    const stairs = Float32Array.from({ length: cols }, (_, i) => Math.floor(i / 50));  // ascending runs of equals
    rows.push(stairs, Float32Array.from(stairs).reverse());
    rows.push(Float32Array.from({ length: cols }, (_, i) => (i % 3 === 0 ? -0 : i % 3 === 1 ? 0 : -1)));
    for (const k of [1, 5, 32, 100]) check(rows, cols, k);
  });

  it('never ranks NaN, keeps -Infinity, and pads a row with fewer ranked scores than k', () => {
    const cols = 400;
    const mostlyNaN = new Float32Array(cols).fill(NaN);
    mostlyNaN[17] = 0.25;
    mostlyNaN[301] = -Infinity;
    mostlyNaN[5] = 0.25;
    const someNaN = random(cols);
    for (let i = 0; i < cols; i += 3) someNaN[i] = NaN;
    const infs = random(cols);
    for (let i = 0; i < cols; i += 2) infs[i] = -Infinity;
    check([mostlyNaN, someNaN, infs, new Float32Array(cols).fill(NaN)], cols, 8);
  });
});
