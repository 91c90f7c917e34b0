// End-to-end tests of `sublinear data ...`: they spawn the compiled CLI (node dist/src/cli.js), as a user
// would run it. `npm test` compiles first (tsc && vitest run); when running vitest directly, run
// `npx tsc -p .` first; the check below refuses to test a dist/ older than the sources.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, CLI, ROOT } from './built.js';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readXC } from '../../src/datasets/xc-reader.js';
import { readSplit, subset } from '../../src/datasets/split-reader.js';
import { synthesizeTaxonomy } from '../../src/datasets/taxonomy.js';

const FIX = join(ROOT, 'datasets/fixtures');
const SHARED = join(ROOT, '../shared/datasets');

let dir: string;
beforeAll(async () => {
  assertBuilt(['src/cli', 'src/util', 'datasets']);
  dir = await mkdtemp(join(tmpdir(), 'sublinear-cli-'));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

function run(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', cwd: ROOT });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function lastJson(stdout: string): Record<string, unknown> {
  const lines = stdout.trimEnd().split('\n');
  return JSON.parse(lines.at(-1)!) as Record<string, unknown>;
}

describe('sublinear data inspect', () => {
  it('prints a human summary', () => {
    const r = run('data', 'inspect', join(FIX, 'tiny.txt'));
    expect(r.code).toBe(0);
    expect(r.stderr).toBe(''); // no progress bar when stderr is not a terminal
    expect(r.stdout).toMatch(/^points +20$/m);
    expect(r.stdout).toMatch(/^features +2,000 /m);
    expect(r.stdout).toMatch(/^labels +100 /m);
    expect(r.stdout).toMatch(/^labels\/point +1\.60 average, 3 max, 1 points with none$/m);
  });

  it('ends stdout with one JSON object under --json', () => {
    const r = run('data', 'inspect', join(FIX, 'tiny.txt'), '--json');
    expect(r.code).toBe(0);
    const j = lastJson(r.stdout);
    expect(j).toMatchObject({ points: 20, features: 2000, labels: 100, nnz: 404, avgFeatures: 20.2, avgLabels: 1.6 });
  });

  it('reads LIBSVM with --format libsvm', () => {
    const r = run('data', 'inspect', '--format', 'libsvm', join(FIX, 'tiny.libsvm'), '--json');
    expect(r.code).toBe(0);
    expect(lastJson(r.stdout)).toMatchObject({ points: 20, nnz: 404, format: 'libsvm' });
  });

  it('exits 1 with file:line: problem for malformed data', async () => {
    const p = join(dir, 'bad.txt');
    await writeFile(p, '2 10 5\n1 0:1\n2 10:1\n');
    const r = run('data', 'inspect', p);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`sublinear: ${p}:3: feature id 10 out of range [0, 10)\n`);
    expect(r.stdout).toBe('');
  });

  it('exits 1 for a missing file', () => {
    const r = run('data', 'inspect', join(dir, 'missing.txt'));
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`sublinear: ${join(dir, 'missing.txt')}: no such file or directory\n`);
  });

  it.skipIf(!existsSync(SHARED))('reads the real Bibtex and Delicious files (only where ../shared exists)', () => {
    const bib = lastJson(run('data', 'inspect', join(SHARED, 'bibtex/Bibtex_data.txt'), '--json').stdout);
    expect(bib).toMatchObject({ points: 7395, features: 1836, labels: 159 });
    const del = lastJson(run('data', 'inspect', join(SHARED, 'delicious/Delicious_train.txt'), '--json').stdout);
    expect(del).toMatchObject({ points: 12920, features: 500, labels: 983, pointsWithoutLabels: 12 });
  });
});

describe('sublinear data split', () => {
  it('writes train.txt and test.txt for one column of the split files', async () => {
    const out = join(dir, 'split');
    const r = run('data', 'split', join(FIX, 'tiny.txt'), '--train-split', join(FIX, 'tiny_trSplit.txt'),
      '--test-split', join(FIX, 'tiny_tstSplit.txt'), '--column', '2', '--out', out, '--json');
    expect(r.code).toBe(0);
    expect(lastJson(r.stdout)).toMatchObject({ trainPoints: 14, testPoints: 6, overlap: 0 });
    const all = await readXC(join(FIX, 'tiny.txt'));
    expect(await readXC(join(out, 'train.txt'))).toEqual(subset(all, readSplit(join(FIX, 'tiny_trSplit.txt'), 2, 20)));
    expect(await readXC(join(out, 'test.txt'))).toEqual(subset(all, readSplit(join(FIX, 'tiny_tstSplit.txt'), 2, 20)));
  });

  it('exits 1 naming the split file line for a column the file lacks', () => {
    const r = run('data', 'split', join(FIX, 'tiny.txt'), '--train-split', join(FIX, 'tiny_trSplit.txt'),
      '--test-split', join(FIX, 'tiny_tstSplit.txt'), '--column', '3', '--out', join(dir, 'x'));
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`sublinear: ${join(FIX, 'tiny_trSplit.txt')}:1: column 3 out of range: the split file has 2 columns\n`);
  });

  it.skipIf(!existsSync(SHARED))('splits Bibtex column 1 into 4880 / 2515 points (only where ../shared exists)', () => {
    const b = join(SHARED, 'bibtex');
    const out = join(dir, 'bibtex1');
    const r = run('data', 'split', join(b, 'Bibtex_data.txt'), '--train-split', join(b, 'bibtex_trSplit.txt'),
      '--test-split', join(b, 'bibtex_tstSplit.txt'), '--column', '1', '--out', out);
    expect(r.code).toBe(0);
    expect(lastJson(run('data', 'inspect', join(out, 'train.txt'), '--json').stdout)).toMatchObject({ points: 4880 });
    expect(lastJson(run('data', 'inspect', join(out, 'test.txt'), '--json').stdout)).toMatchObject({ points: 2515 });
  });
});

describe('sublinear data synth', () => {
  it('writes train.txt and test.txt; the same seed gives the same bytes', async () => {
    const a = join(dir, 'synth-a'), b = join(dir, 'synth-b');
    const r1 = run('data', 'synth', '--shape', 'tiny', '--train', '50', '--test', '10', '--seed', '3', '--out', a, '--json');
    const r2 = run('data', 'synth', '--shape=tiny', '--train=50', '--test=10', '--seed=3', '--out', b);
    expect([r1.code, r2.code]).toEqual([0, 0]);
    expect(lastJson(r1.stdout)).toMatchObject({ trainPoints: 50, testPoints: 10, shape: 'tiny', seed: 3 });
    expect(r2.stdout).toMatch(/^wrote .*train\.txt \(50 points\) and .*test\.txt \(10 points\)/);
    expect(await readFile(join(a, 'train.txt'))).toEqual(await readFile(join(b, 'train.txt')));
    expect(await readFile(join(a, 'test.txt'))).toEqual(await readFile(join(b, 'test.txt')));
    expect((await readXC(join(a, 'test.txt'))).points).toBe(10);
  });

  it('--model taxonomy writes the second data model, equal to synthesizeTaxonomy; its shapes are checked per model', async () => {
    const out = join(dir, 'synth-taxonomy');
    const r = run('data', 'synth', '--model', 'taxonomy', '--shape', 'tiny', '--train', '40', '--test', '8', '--seed', '5', '--out', out, '--json');
    expect(r.code, r.stderr).toBe(0);
    expect(lastJson(r.stdout)).toMatchObject({ model: 'taxonomy', shape: 'tiny', trainPoints: 40, testPoints: 8, seed: 5 });
    const all = synthesizeTaxonomy({ shape: 'tiny', points: 48, seed: 5 });
    expect(await readXC(join(out, 'train.txt'))).toEqual(subset(all, Array.from({ length: 40 }, (_, i) => i)));
    expect(await readXC(join(out, 'test.txt'))).toEqual(subset(all, Array.from({ length: 8 }, (_, i) => 40 + i)));
    const bad = run('data', 'synth', '--model', 'taxonomy', '--shape', 'amazon-670k', '--train', '1', '--out', join(dir, 'no'));
    expect(bad.code).toBe(2);
    expect(bad.stderr.split('\n')[0]).toBe("sublinear data synth: option --shape must be one of tiny, small, 200k for --model taxonomy but received 'amazon-670k'");
    const bad2 = run('data', 'synth', '--shape', '200k', '--train', '1', '--out', join(dir, 'no'));
    expect(bad2.stderr.split('\n')[0]).toBe("sublinear data synth: option --shape must be one of tiny, small, amazon-670k, delicious-200k, wiki-325k for --model prototype but received '200k'");
    expect(existsSync(join(dir, 'no'))).toBe(false);
  });
});

describe('usage errors exit 2, help exits 0', () => {
  const usage: [string[], string][] = [
    [[], 'Usage: sublinear <command> [options]'],
    [['data'], 'Usage: sublinear data <command> [options]'],
    [['frobnicate'], "sublinear: unknown command 'frobnicate'"],
    [['data', 'insp'], "sublinear data: unknown command 'insp' (did you mean inspect?)"],
    [['data', 'inspect'], 'sublinear data inspect: missing argument <file>'],
    [['data', 'inspect', 'a', 'b'], "sublinear data inspect: unexpected argument 'b'"],
    [['data', 'inspect', 'a', '--jsn'], 'sublinear data inspect: unknown option --jsn (did you mean --json?)'],
    [['data', 'inspect', 'a', '--format', 'csv'], "sublinear data inspect: option --format must be one of xc, libsvm but received 'csv'"],
    [['data', 'inspect', 'a', '--json=1'], 'sublinear data inspect: option --json does not take a value'],
    [['data', 'synth', '--shape', 'tiny', '--out', 'x'], 'sublinear data synth: missing required option --train'],
    [['data', 'synth', '--shape', 'tiny', '--train', '1e3', '--out', 'x'], "sublinear data synth: option --train expects an integer but received '1e3'"],
    [['data', 'synth', '--shape', 'tiny', '--train', '-5', '--out', 'x'], 'sublinear data synth: option --train must be >= 0 but received -5'],
    [['data', 'synth', '--shape', 'tiny', '--train', '5', '--out'], 'sublinear data synth: option --out needs a value'],
    [['data', 'split', 'd', '--column', '1', '--column', '2'], 'sublinear data split: option --column given more than once'],
  ];
  for (const [args, first] of usage) {
    it(`sublinear ${args.join(' ')}`, () => {
      const r = run(...args);
      expect(r.code).toBe(2);
      expect(r.stderr.split('\n')[0]).toBe(first);
      expect(r.stdout).toBe('');
    });
  }

  it('--help on every command and group', () => {
    for (const args of [['--help'], ['data', '--help'], ['data', 'inspect', '--help'], ['data', 'split', '-h'], ['data', 'synth', '--shape', 'bogus', '--help']]) {
      const r = run(...args);
      expect(r.code, args.join(' ')).toBe(0);
      expect(r.stdout).toMatch(/^Usage: sublinear/);
    }
    const synth = run('data', 'synth', '--help').stdout;
    expect(synth).toContain('--shape <tiny|small|amazon-670k|delicious-200k|wiki-325k|200k>');
    expect(synth).toContain('--model <prototype|taxonomy>');
    expect(synth).toContain('--seed <s>');
    expect(synth).toContain('random seed (default: 1)');
    expect(run('--help').stdout).toMatch(/^ {2}data +Inspect, split, generate and featurize datasets\.$/m);
  });

  it('--version prints the package version', async () => {
    const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    expect(run('--version')).toEqual({ code: 0, stdout: `${pkg.version}\n`, stderr: '' });
  });
});
