// The addon loader's SUBLINEAR_ADDON override (used by `npm run test:asan`), and native robustness against
// garbage in the JS-writable memory the kernels read: hash tables and CSR arrays with random values at
// random places must make a call either work or throw a `sublinear native:` error, never crash or read
// out of bounds. Under `npm run test:asan` an out-of-bounds read here is an AddressSanitizer report.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { synthesize } from '../../src/datasets/index.js';
import { Network } from '../../src/network/network.js';
import { native } from '../../src/native/addon.js';
import { Xoshiro128 } from '../../src/util/rng.js';
import { fit } from '../../src/train/fit-network.js';

const ROOT = join(import.meta.dirname, '../..');

function loadWith(addon: string) {
  const code = `import(${JSON.stringify(join(ROOT, 'src/native/addon.ts'))}).then((m) => { m.native(); console.log('loaded'); })`;
  // src/native/addon.ts needs a TS loader; the compiled copy is what users run.
  const js = code.replace('src/native/addon.ts', 'dist/src/native/addon.js');
  return spawnSync(process.execPath, ['-e', js], { encoding: 'utf8', env: { ...process.env, SUBLINEAR_ADDON: addon } });
}

describe('SUBLINEAR_ADDON', () => {
  it('names the addon file to load, and only that one is tried', () => {
    const missing = join(ROOT, 'no-such-dir', 'sublinear.node');
    const r = loadWith(missing);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(
      `sublinear: could not load the native addon named by SUBLINEAR_ADDON.\n  - ${missing}: not found\nUnset SUBLINEAR_ADDON to use the regular build.`,
    );
    const ok = loadWith(process.env.SUBLINEAR_ADDON ?? join(ROOT, 'build/Release/sublinear.node'));
    expect({ status: ok.status, stdout: ok.stdout }).toEqual({ status: 0, stdout: 'loaded\n' });
  });
});

describe('garbage in shared memory never crashes the kernels', () => {
  const data = synthesize({ shape: 'tiny', points: 200, seed: 21 });
  const setup = async () => {
    const net = new Network({
      inputDim: data.features,
      layers: [{ size: 16 }, { size: data.labels, sampling: { hash: 'dwta', K: 3, L: 6, budget: 12 } }],
      seed: 8,
    });
    await fit(net, data, { epochs: 1, workers: 0 });
    return net;
  };
  const pointIds = Uint32Array.from({ length: 32 }, (_, i) => i);
  const hyper = { mode: 0 as const, lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, gradScale: 1 / 32, seed: 5 };
  const garbage = (rng: Xoshiro128) => [0, 1, 2, 0x7fffffff, 0xffffffff, 0xfffffffe, rng.nextU32(), rng.below(1000)][rng.below(8)]!;

  /** Runs train and sampled/exact predict; returns 'ok' or the native error message. */
  function callAll(net: Network, d: typeof data): string[] {
    const outcomes: string[] = [];
    const attempt = (f: () => void) => {
      try {
        f();
        outcomes.push('ok');
      } catch (e) {
        expect(e).toBeInstanceOf(Error);
        expect((e as Error).message).toMatch(/^sublinear native: /);
        outcomes.push((e as Error).message);
      }
    };
    attempt(() => native().netTrainSlice(net.spec, d, pointIds, hyper, new Float64Array(4)));
    for (const sampled of [0, 1] as const) {
      attempt(() => native().netPredictSlice(net.spec, d, pointIds, 3, sampled, new Uint32Array(96), new Float32Array(96)));
    }
    return outcomes;
  }

  it('hash tables: 150 rounds of random values in offsets, fill, seen, ids and keys', async () => {
    const net = await setup();
    const t = net.spec.layers[1]!.sampling!.tables;
    const arrays = { offsets: t.offsets, fill: t.fill, seen: t.seen, ids: t.ids, keys: t.keys };
    const clean = Object.fromEntries(Object.entries(arrays).map(([k, a]) => [k, a.slice()]));
    const rng = new Xoshiro128(99n);
    let refused = 0;
    for (let round = 0; round < 150; round++) {
      for (const [k, a] of Object.entries(arrays)) a.set(clean[k]!);
      const names = Object.keys(arrays) as (keyof typeof arrays)[];
      for (let m = 1 + rng.below(4); m > 0; m--) {
        const a = arrays[names[rng.below(names.length)]!];
        a[rng.below(a.length)] = garbage(rng);
      }
      const out = callAll(net, data);
      refused += out.filter((o) => o !== 'ok').length;
      for (const o of out) if (o !== 'ok') expect(o).toMatch(/tables are corrupt|out of range|sublinear native/);
    }
    // Much damage is harmless (a stale seen counter, an id in a bucket no sample hits); some is not:
    // both paths ran (14 refusals of 450 calls with this seed).
    expect(refused).toBeGreaterThan(5);
  });

  it('CSR data: 150 rounds of random values in offsets, indices and labels', async () => {
    const net = await setup();
    const rng = new Xoshiro128(7n);
    let refused = 0;
    for (let round = 0; round < 150; round++) {
      const d = {
        ...data,
        offsets: data.offsets.slice(), indices: data.indices.slice(), values: data.values.slice(),
        labelOffsets: data.labelOffsets.slice(), labelIndices: data.labelIndices.slice(),
      };
      const arrays = [d.offsets, d.indices, d.labelOffsets, d.labelIndices];
      for (let m = 1 + rng.below(3); m > 0; m--) {
        const a = arrays[rng.below(arrays.length)]!;
        // Damage the rows of the batch (the first 32 points) where it is read.
        a[rng.below(Math.min(a.length, 40 * 12))] = garbage(rng);
      }
      if (rng.below(4) === 0) d.values[rng.below(d.values.length)] = [NaN, Infinity, -Infinity, 3e38][rng.below(4)]!;
      refused += callAll(net, d).filter((o) => o !== 'ok').length;
    }
    expect(refused).toBeGreaterThan(20);
  });
});

describe('netReleasePages', () => {
  /** Resident bytes of this process (/proc/self/statm), or null off Linux. */
  const rss = (): number | null => {
    try {
      return Number(readFileSync('/proc/self/statm', 'utf8').split(' ')[1]) * 4096;
    } catch {
      return null;
    }
  };
  it('zeroes the array, gives its pages back to the kernel, and the array stays usable', () => {
    const a = new Float32Array(new SharedArrayBuffer(64 << 20), 12, (64 << 20) / 4 - 5); // not page-aligned at either end
    a.fill(1.5);
    const before = rss();
    const released = native().netReleasePages(a);
    const after = rss();
    let nonzero = 0;
    for (let i = 0; i < a.length; i++) if (a[i] !== 0) nonzero++;
    expect(nonzero).toBe(0);
    if (process.platform === 'linux') {
      expect(released).toBeGreaterThan(60 << 20);
      expect(before! - after!).toBeGreaterThan(48 << 20);
    }
    a[7] = 2; // written again: memory again
    expect(a[7]).toBe(2);
    const u = new Uint32Array(1000).fill(7);
    native().netReleasePages(u);
    expect(u.every((x) => x === 0)).toBe(true);
    expect(() => native().netReleasePages(new Int32Array(8) as unknown as Float32Array)).toThrow(/^sublinear native: .*Float32Array/);
  });
});

describe('netAdviseHugePages', () => {
  it('is a hint: contents written after it (and before a second one) stay as written; a wrong argument throws', () => {
    const a = new Float32Array(new SharedArrayBuffer(24 << 20)); // above the 16 MiB the advice starts at
    native().netAdviseHugePages(a); // before the first write, as allocateLayers gives it
    for (let i = 0; i < a.length; i += 997) a[i] = i;
    native().netAdviseHugePages(a); // again, after writes (a no-op for an advised range)
    let bad = 0;
    for (let i = 0; i < a.length; i++) if (a[i] !== (i % 997 === 0 ? i : 0)) bad++;
    expect(bad).toBe(0);
    native().netAdviseHugePages(new Float32Array(8)); // small arrays are left alone
    expect(() => native().netAdviseHugePages(new Uint32Array(8) as unknown as Float32Array)).toThrow(/^sublinear native: .*Float32Array/);
  });
});
