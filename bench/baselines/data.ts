// Small data helpers for the baseline measurements: an Extreme Classification Repository text reader
// (used when datasets/xc-reader.ts is not available) and two synthetic CSR generators: pure random
// (throughput only) and a learnable one (for time-to-accuracy runs). Plain ArrayBuffers: the baselines
// need no SharedArrayBuffers.

import { readFileSync } from 'node:fs';
import type { SparseDataset } from '../../datasets/csr.js';
import { Xoshiro128 } from '../../src/util/rng.js';

/** Loads an XC-format file, through datasets/xc-reader.ts `readXC` when it exists, else a local parser. */
export async function loadXC(path: string): Promise<SparseDataset> {
  try {
    const mod = (await import(new URL('../../datasets/xc-reader.js', import.meta.url).href)) as {
      readXC?: (p: string) => Promise<SparseDataset>;
    };
    if (typeof mod.readXC === 'function') return await mod.readXC(path);
  } catch (e) {
    if ((e as { code?: string }).code !== 'ERR_MODULE_NOT_FOUND') throw e;
  }
  return parseXC(readFileSync(path, 'utf8'));
}

/** Minimal XC text parser: header `N D L`, then `l1,l2,... f:v f:v ...` per line (ids 0-based). */
export function parseXC(text: string): SparseDataset {
  const lines = text.split('\n');
  const [N, D, L] = lines[0]!.trim().split(/\s+/).map(Number) as [number, number, number];
  const offsets = new Uint32Array(N + 1), labelOffsets = new Uint32Array(N + 1);
  const idx: number[] = [], val: number[] = [], lab: number[] = [];
  for (let i = 0; i < N; i++) {
    const line = lines[i + 1] ?? '';
    const toks = line.split(' ');
    let t = 0;
    const mine: number[] = [];
    if (!line.startsWith(' ') && toks[0] && !toks[0].includes(':')) {
      for (const s of toks[0].split(',')) if (s) mine.push(Number(s));
      t = 1;
    }
    const feats: [number, number][] = [];
    for (; t < toks.length; t++) {
      const s = toks[t]!;
      if (!s) continue;
      const c = s.indexOf(':');
      feats.push([Number(s.slice(0, c)), Number(s.slice(c + 1))]);
    }
    feats.sort((a, b) => a[0] - b[0]);
    for (const [f, v] of feats) { idx.push(f); val.push(v); }
    offsets[i + 1] = idx.length;
    lab.push(...mine.sort((a, b) => a - b));
    labelOffsets[i + 1] = lab.length;
  }
  return {
    points: N, features: D, labels: L, offsets, indices: Uint32Array.from(idx), values: Float32Array.from(val),
    labelOffsets, labelIndices: Uint32Array.from(lab),
  };
}

function sortedUnique(ids: Set<number>): number[] {
  return [...ids].sort((a, b) => a - b);
}

/** Random CSR (no structure): `nnz` features and `labelsPerPoint` labels per point. For throughput only. */
export function randomCsr(points: number, features: number, labels: number, nnz: number, labelsPerPoint: number, seed: number): SparseDataset {
  const rng = new Xoshiro128(seed);
  const offsets = new Uint32Array(points + 1), labelOffsets = new Uint32Array(points + 1);
  const indices = new Uint32Array(points * nnz), values = new Float32Array(points * nnz);
  const labelIndices = new Uint32Array(points * labelsPerPoint);
  let p = 0, q = 0;
  for (let i = 0; i < points; i++) {
    const f = new Set<number>();
    while (f.size < nnz) f.add(rng.below(features));
    for (const id of sortedUnique(f)) { indices[p] = id; values[p++] = 0.05 + rng.nextFloat() * 0.3; }
    const l = new Set<number>();
    while (l.size < labelsPerPoint) l.add(rng.below(labels));
    for (const id of sortedUnique(l)) labelIndices[q++] = id;
    offsets[i + 1] = p;
    labelOffsets[i + 1] = q;
  }
  return { points, features, labels, offsets, indices, values, labelOffsets, labelIndices };
}

/**
 * A learnable problem at an extreme-classification shape: every label owns `signature` random feature
 * ids; a point has 1-3 labels (mean ~1.6) and shows each feature of its labels' signatures with
 * probability `keep`, plus `noise` random features; values in [0.05, 0.35). Train and test share the
 * label signatures (same `seed`), and differ by `split` (0 train, 1 test).
 */
export function learnableCsr(
  points: number, features: number, labels: number, seed: number, split: 0 | 1,
  { signature = 12, keep = 0.6, noise = 40 }: { signature?: number; keep?: number; noise?: number } = {},
): SparseDataset {
  const sigRng = new Xoshiro128(seed);
  const sig = new Uint32Array(labels * signature);
  for (let i = 0; i < sig.length; i++) sig[i] = sigRng.below(features);
  const rng = new Xoshiro128(seed * 2 + 1 + split * 1_000_003);
  const offsets = new Uint32Array(points + 1), labelOffsets = new Uint32Array(points + 1);
  const idx: number[] = [], val: number[] = [], lab: number[] = [];
  for (let i = 0; i < points; i++) {
    const ls = new Set<number>([rng.below(labels)]);
    if (rng.nextFloat() < 0.4) ls.add(rng.below(labels));
    if (rng.nextFloat() < 0.2) ls.add(rng.below(labels));
    const fs = new Set<number>();
    for (const l of ls) for (let j = 0; j < signature; j++) if (rng.nextFloat() < keep) fs.add(sig[l * signature + j]!);
    for (let j = 0; j < noise; j++) fs.add(rng.below(features));
    for (const f of sortedUnique(fs)) { idx.push(f); val.push(0.05 + rng.nextFloat() * 0.3); }
    lab.push(...sortedUnique(ls));
    offsets[i + 1] = idx.length;
    labelOffsets[i + 1] = lab.length;
  }
  return {
    points, features, labels, offsets, indices: Uint32Array.from(idx), values: Float32Array.from(val),
    labelOffsets, labelIndices: Uint32Array.from(lab),
  };
}
