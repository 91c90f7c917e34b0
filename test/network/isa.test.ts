// The dense block kernels exist in AVX-512, AVX2 and SSE instantiations (register blocking per vector
// width); every variant this CPU can run must compute the same training step and predictions.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { native } from '../../src/native/addon.js';
import { maxRelDiff } from './helpers.js';

interface IsaRun {
  isa: string;
  losses: number[];
  idx: number[];
  val: number[];
  weights: number[][];
}

function run(isa: string): IsaRun {
  const script = fileURLToPath(new URL('./isa-check.mjs', import.meta.url));
  const out = execFileSync(process.execPath, [script], { env: { ...process.env, SUBLINEAR_BLOCK_ISA: isa }, encoding: 'utf8' });
  return JSON.parse(out) as IsaRun;
}

describe('block-kernel ISA variants agree', () => {
  it('avx512 / avx2 / sse give the same losses, weights and top-k', () => {
    const f = native().cpuFeatures();
    const isas = ['sse', ...(f.avx2 && f.fma ? ['avx2'] : []), ...(f.avx512f ? ['avx512'] : [])];
    const runs = isas.map(run);
    runs.forEach((r, i) => expect(r.isa).toBe(isas[i]));
    const base = runs[0]!;
    for (const r of runs.slice(1)) {
      expect(maxRelDiff(r.losses, base.losses)).toBeLessThan(1e-5);
      r.weights.forEach((w, k) => expect(maxRelDiff(w, base.weights[k]!), `${r.isa} layer ${k}`).toBeLessThan(1e-5));
      expect(r.idx).toEqual(base.idx);
      expect(maxRelDiff(r.val, base.val)).toBeLessThan(1e-5);
    }
    expect(native().netKernelIsa).toBe(isas.at(-1));
  });
});
