// `sublinear plan` (src/cli/plan.ts) and train's plan line: flags, usage errors (exit 2, naming the flag),
// data errors (exit 1, naming file and line) and --json. The machine's costs come from a calibration file
// written here (no timing probe runs; no timing is asserted). Spawns the compiled CLI (`npm test` builds it).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { assertBuilt, CLI, ROOT } from './built.js';
import { defaultConfig, resolveConfig } from '../../src/network/config.js';
import { readXC } from '../../src/datasets/index.js';
import { planNetworkMemory } from '../../src/network/memory-plan.js';
import { PLAN_SHAPES, shapeFromCounts, type Calibration } from '../../src/train/plan.js';
import { writeCachedCalibration } from '../../src/train/calibrate.js';

const dir = mkdtempSync(join(tmpdir(), 'sublinear-plan-cli-'));
const tiny = join(ROOT, 'datasets/fixtures/tiny.txt');
const calFile = join(dir, 'cal.json');
/** Round numbers standing in for a measurement, so that the output is predictable. */
const CAL: Calibration = {
  cpu: 'test', hidden: 0, lowerPerMac: 1e-9, outputPerMac: 1e-10, widePerPair: 1e-8, perSample: 1e-5, applyPerFloat: 2e-9,
  rebuildPerRowTable: 2e-8, rebuildPerBucket: 3e-9, parallelEfficiency: 1, parallelWorkers: 2, baseRssBytes: 50e6, workerRss: { first: 10e6, next: 7e6 }, probeSeconds: 0,
  shard: { lowerPerMac: 2e-9, lowerPerSample: 3e-6, outputPerMac: 1.5e-10, widePerPair: 2e-8, perSample: 4e-6, spreadPerSample: 1e-6, coLocated: 1.2, coLocatedBarrier: 2 },
};

beforeAll(async () => {
  assertBuilt(['src/cli', 'src/train']);
  const d = await readXC(tiny);
  await writeCachedCalibration(resolveConfig(defaultConfig(d)), CAL, calFile);
  const big = shapeFromCounts(PLAN_SHAPES['amazon-3m']);
  const c = defaultConfig(big);
  c.layers[0] = { ...c.layers[0]!, size: 1024 };
  await writeCachedCalibration(resolveConfig(c), CAL, calFile);
  await writeCachedCalibration(resolveConfig(defaultConfig(big)), CAL, join(dir, 'cache', 'calibration.json'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function run(args: string[], env: Record<string, string> = {}): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', cwd: dir, timeout: 120_000, env: { ...process.env, SUBLINEAR_CACHE_DIR: join(dir, 'cache'), ...env } });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('sublinear plan: usage errors', () => {
  const usage = (args: string[], message: string) => {
    const r = run(['plan', ...args]);
    expect(r.code).toBe(2);
    expect(r.stderr.split('\n')[0]).toBe(`sublinear plan: ${message}`);
  };
  it('names what is missing or wrong', () => {
    usage([], 'give a data file, --shape, or --points --features --labels --avg-nnz --avg-labels');
    usage([tiny, '--shape', 'amazon-3m'], 'give one of: a data file, --shape, or the counts (--points ...)');
    usage(['--points', '10', '--features', '5'], 'the shape needs --labels, --avg-nnz, --avg-labels too');
    usage([tiny, '--link-gbps', '10,fast'], "option --link-gbps expects a comma-separated list of positive numbers but received '10,fast'");
    usage([tiny, '--ranks', '2,0'], "option --ranks expects a comma-separated list of positive integers but received '2,0'");
    usage([tiny, '--ranks', '2', '--max-ranks', '4'], 'give --ranks or --max-ranks, not both');
    usage([tiny, '--modes', 'single,sharded,ring'], "option --modes expects single, replicated or sharded but received 'ring'");
    usage(['--shape', 'amazon-4m'], "option --shape must be one of amazon-670k, amazon-3m but received 'amazon-4m'");
    expect(run(['plan', tiny, '--memory', 'lots']).stderr).toMatch(/^sublinear plan: .*--memory/);
    expect(run(['plan', tiny, '--memory', 'lots']).code).toBe(2);
  });
});

describe('sublinear plan: data errors', () => {
  it('a missing file and a bad line exit 1 naming them', () => {
    const missing = run(['plan', join(dir, 'nope.txt'), '--calibration', calFile]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/nope\.txt: /);
    const bad = (text: string) => {
      writeFileSync(join(dir, 'bad.txt'), text);
      const r = run(['plan', join(dir, 'bad.txt'), '--calibration', calFile, '--quiet']);
      expect(r.code).toBe(1);
      return r.stderr;
    };
    expect(bad('2 10 5\n0 1:1\n1 3:0.5 12:1\n')).toBe(`sublinear: ${join(dir, 'bad.txt')}:3: feature 12 is out of range (the header says 10 features)\n`);
    expect(bad('2 10 5\n0 1:1\n1 3:x\n')).toBe(`sublinear: ${join(dir, 'bad.txt')}:3: expected a finite value after feature 3:\n`);
  });
});

describe('sublinear plan: output', () => {
  it('--json: the network, memory per rank from memory-plan.ts, per-rank cost terms, the choice', async () => {
    const r = run(['plan', tiny, '--calibration', calFile, '--ranks', '1,2', '--modes', 'single,sharded', '--epochs', '3', '--json', '--quiet']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const j = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as {
      network: string; shape: { points: number }; calibration: { cached: boolean }; chosen: { mode: string; memoryPerRankBytes: number; memoryParts: unknown; workers: number };
      candidates: { mode: string; ranks: number; stepSeconds: Record<string, number>; collectives: { name: string }[]; receivedBytesPerStep: number }[]; reason: string; line: string;
    };
    const stats = { bufferBytes: 0 };
    const d = await readXC(tiny, { stats });
    const c = resolveConfig(defaultConfig(d));
    expect(j.network).toBe('2000 -> 1024 -> 100');
    expect(j.shape.points).toBe(20);
    expect(j.calibration.cached).toBe(true);
    const single = j.candidates.find((x) => x.mode === 'single')!;
    const s1 = single as unknown as { memoryPerRankBytes: number; memoryParts: { name: string; bytes: number }[]; workers: number };
    expect(s1.workers).toBe(1); // dense output: one worker (defaults rule), whose batches the cores share
    expect((single as unknown as { threads: number }).threads).toBe(Math.max(1, cpus().length));
    // memory-plan.ts's parts and the reader's buffers as training's read of the file holds them.
    expect(stats.bufferBytes).toBeGreaterThan(0);
    expect(s1.memoryPerRankBytes).toBe(planNetworkMemory(c, 1, d, false).totalBytes + stats.bufferBytes);
    expect(s1.memoryParts.filter((p) => p.name !== 'read buffers')).toEqual(planNetworkMemory(c, 1, d, false).parts);
    expect(s1.memoryParts.find((p) => p.name === 'read buffers')!.bytes).toBe(stats.bufferBytes);
    expect(['single', 'sharded']).toContain(j.chosen.mode);
    expect(single.receivedBytesPerStep).toBe(0);
    const sharded = j.candidates.find((x) => x.mode === 'sharded' && x.ranks === 2)!;
    expect(sharded.collectives.map((x) => x.name)).toEqual(['pre-activations', 'softmax stats', 'hidden gradient']);
    expect((sharded as unknown as { workers: number }).workers).toBe(1); // one thread per sharded rank
    expect(Object.keys(sharded.stepSeconds)).toEqual(['lower', 'output', 'wide', 'overhead', 'apply', 'rebuild', 'exchange', 'wait', 'total']);
    expect(j.line).toMatch(/^plan: (1 process x 1 worker( x \d+ threads per batch)?|2 sharded ranks x 1 worker at 10 Gb\/s), batch 128: [\d.]+ MB per (process|rank) \(peak RSS ~[\d.]+ MB\), ~[\d,]+ samples\/s, [\d.]+ s per epoch$/);
  });

  it('projections from a known shape: the single process does not fit, sharded ranks do', () => {
    const r = run(['plan', '--shape', 'amazon-3m', '--hidden', '1024', '--ranks', '8,16', '--link-gbps', '10,100', '--memory', '24GB', '--calibration', calFile, '--quiet']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^data: amazon-3m: 1,717,899 points, 337,067 features, 2,812,281 labels/);
    expect(r.stdout).toMatch(/^network: 337067 -> 1024 -> 2812281 \(sampled dwta K=7 L=50, wide\)$/m);
    expect(r.stdout).toMatch(/^excluded: single x 1: needs [\d.]+ GB per machine, more than 90% of 24.0 GB$/m);
    expect(r.stdout).toMatch(/^\| mode \| ranks \| workers \| memory per rank \| received per rank per step \| step ms at 10 Gb\/s .* \| samples\/s at 10 Gb\/s \| 100 Gb\/s \|$/m);
    expect(r.stdout).toMatch(/^\| sharded \| 16 \| 1 \| [\d.]+ GB \| [\d.]+ MB \| [\d.]+ \(/m);
    expect(r.stdout).toMatch(/^chosen: \d+ sharded ranks are the fastest configuration that fits \(one process does not fit\)$/m);
  });

  it('train prints the plan line at start (not under --quiet)', () => {
    const env = { SUBLINEAR_CACHE_DIR: join(dir, 'empty-cache') };
    const t = run(['train', '--train', tiny, '--epochs', '1', '--batch', '8', '--workers', '1'], env);
    expect(t.code).toBe(0);
    expect(t.stderr).toMatch(/^plan: 1 process x 1 worker, batch 8: [\d.]+ MB per process; speed not calibrated on this machine \(sublinear plan measures it\)$/m);
    expect(run(['train', '--train', tiny, '--epochs', '1', '--batch', '8', '--workers', '1', '--quiet'], env).stderr).not.toMatch(/plan:/);
  });
});
