// Raw text through the CLI: train --input-format text, predict printing label names (ids with --format xc),
// eval on text, data featurize, train --init growing the label set, and file:line errors.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, CLI, ROOT } from './built.js';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Network } from '../../src/network/network.js';
import { readXC } from '../../src/datasets/xc-reader.js';
import { readTextDatasets } from '../../src/text/load.js';
import { topicLines } from '../text/synthetic-text.js';

let dir: string;
const f = (name: string) => join(dir, name);
beforeAll(async () => {
  assertBuilt(['src/cli', 'src/network', 'src/text']);
  dir = await mkdtemp(join(tmpdir(), 'sublinear-cli-text-'));
  // Unlabelled lines (their text only) are skipped by training but count for the vocabulary: here they hold
  // the words of two topics whose labels come later, with the warm start's data.
  const unlabelled = topicLines(60, 12, 14, 6).map((l) => l.split('\t')[1]!);
  writeFileSync(f('train.txt'), [...topicLines(800, 0, 12, 1), ...unlabelled].join('\n') + '\n');
  writeFileSync(f('test.txt'), topicLines(200, 0, 12, 2).join('\n') + '\n');
  // New data for a warm start: two topics the model has never seen, plus some of the old ones.
  writeFileSync(f('more.txt'), [...topicLines(300, 12, 14, 3), ...topicLines(300, 0, 12, 4)].join('\n') + '\n');
  writeFileSync(f('new-test.txt'), topicLines(100, 12, 14, 5).join('\n') + '\n');
  const r = run('train', '--train', f('train.txt'), '--test', f('test.txt'), '--input-format', 'text', '--min-df', '1', '--epochs', '4', '--workers', '1', '--save', f('m.sl'), '--json');
  expect(r.code, r.stderr).toBe(0);
  expect(JSON.parse(r.stdout.trim().split('\n').at(-1)!).p1).toBeGreaterThan(0.9); // observed 1.0
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

function run(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', cwd: ROOT, maxBuffer: 1 << 28 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('text through the CLI', () => {
  it('the saved model holds the vectorizer and names; predict reads raw text and prints names (jsonl), ids with --format xc', async () => {
    const net = await Network.load(f('m.sl'));
    expect(net.labelNames).toHaveLength(12);
    expect(net.textVectorizer!.options.minDf).toBe(1);
    const lines = readFileSync(f('test.txt'), 'utf8').trimEnd().split('\n');
    // Input without labels: the text alone.
    writeFileSync(f('input.txt'), lines.map((l) => l.split('\t')[1]).join('\n') + '\n');
    const r = run('predict', '--model', f('m.sl'), '--input', f('input.txt'), '--k', '2');
    expect([r.code, r.stderr]).toEqual([0, '']);
    const out = r.stdout.trimEnd().split('\n').map((l) => JSON.parse(l) as { id: number; labels: string[]; scores: number[] });
    expect(out).toHaveLength(lines.length);
    const right = out.filter((o, i) => o.labels[0] === lines[i]!.split('\t')[0]).length;
    expect(right / lines.length).toBeGreaterThan(0.9);
    const xc = run('predict', '--model', f('m.sl'), '--input', f('input.txt'), '--k', '2', '--format', 'xc');
    expect(xc.code).toBe(0);
    const xcLines = xc.stdout.trimEnd().split('\n');
    expect(xcLines[0]).toBe(`${lines.length} 12`);
    expect(xcLines[1]!.split(' ').map((p) => net.labelNames![Number(p.split(':')[0])])).toEqual(out[0]!.labels);
  });

  it('eval reads text test data with label names', () => {
    const r = run('eval', '--model', f('m.sl'), '--test', f('test.txt'), '--json');
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).p1).toBeGreaterThan(0.9);
  });

  it('data featurize writes XC files, labels.txt and vocabulary.txt equal to the library featurisation', async () => {
    const r = run('data', 'featurize', '--train', f('train.txt'), '--test', f('test.txt'), '--out', f('xc'), '--min-df', '1', '--json');
    expect(r.code, r.stderr).toBe(0);
    const lib = await readTextDatasets(f('train.txt'), f('test.txt'), { vectorizerOptions: { minDf: 1 } });
    const train = await readXC(join(f('xc'), 'train.txt'));
    expect(train).toEqual(lib.train);
    expect(await readXC(join(f('xc'), 'test.txt'))).toEqual(lib.test);
    expect(readFileSync(join(f('xc'), 'labels.txt'), 'utf8')).toBe(lib.labelNames.map((n, i) => `${i}\t${n}\n`).join(''));
    expect(readFileSync(join(f('xc'), 'vocabulary.txt'), 'utf8').split('\n')[0]).toBe(`0\t${lib.vectorizer.vocabulary[0]}`);
    // The numeric files train like the text does.
    const t = run('train', '--train', join(f('xc'), 'train.txt'), '--test', join(f('xc'), 'test.txt'), '--epochs', '2', '--workers', '1', '--save', f('num.sl'), '--json');
    expect(t.code, t.stderr).toBe(0);
  });

  it('train --init grows the label set: old names keep their ids, new names follow, and the new labels are predicted', async () => {
    const r = run('train', '--init', f('m.sl'), '--train', f('more.txt'), '--input-format', 'text', '--epochs', '3', '--workers', '1', '--save', f('m2.sl'));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain(`warm start from ${f('m.sl')}: 12 labels, grown to 14 (2 new)`);
    const before = await Network.load(f('m.sl')), after = await Network.load(f('m2.sl'));
    expect(after.labelNames!.slice(0, 12)).toEqual(before.labelNames);
    expect(after.labelNames!.slice(12)).toEqual(['topic12', 'topic13'].filter((n) => after.labelNames!.includes(n)));
    expect(after.labelNames).toHaveLength(14);
    expect(after.textVectorizer!.vocabulary).toEqual(before.textVectorizer!.vocabulary);
    const e = run('eval', '--model', f('m2.sl'), '--test', f('test.txt'), '--json');
    expect(JSON.parse(e.stdout).p1).toBeGreaterThan(0.9); // old labels kept
    const e2 = run('eval', '--model', f('m2.sl'), '--test', f('new-test.txt'), '--json');
    expect(e2.code, e2.stderr).toBe(0);
    expect(JSON.parse(e2.stdout).p1).toBeGreaterThan(0.9); // observed 1.0
  });

  it('refuses text errors with file:line, a numeric --init model for text, and text flags on numeric data', () => {
    writeFileSync(f('bad.txt'), 'a\tfine text\nb\t\n');
    const r = run('train', '--train', f('bad.txt'), '--input-format', 'text');
    expect([r.code, r.stderr]).toEqual([1, `sublinear: ${f('bad.txt')}:2: empty text (a point needs some text after its labels)\n`]);
    const p = run('predict', '--model', f('m.sl'), '--input', f('bad.txt'));
    expect([p.code, p.stderr]).toEqual([1, `sublinear: ${f('bad.txt')}:2: empty text (a point needs some text after its labels)\n`]);
    const u = run('train', '--train', f('train.txt'), '--bigrams');
    expect(u.code).toBe(2);
    expect(u.stderr).toContain('--bigrams applies to --input-format text only');
    const n = run('train', '--init', f('num.sl'), '--train', f('more.txt'), '--input-format', 'text');
    expect([n.code, n.stderr]).toEqual([1, `sublinear: ${f('num.sl')} was trained on numeric features: --input-format text needs a model trained on text\n`]);
    const i = run('train', '--init', f('m.sl'), '--train', f('more.txt'), '--input-format', 'text', '--min-df', '3');
    expect(i.code).toBe(2);
    expect(i.stderr).toContain('--min-df cannot be combined with --init: the vocabulary comes from the --init model');
    const c = run('train', '--train', f('train.txt'), '--format', 'xc', '--input-format', 'text');
    expect(c.code).toBe(2);
    expect(c.stderr).toContain('--format xc and --input-format text disagree (they are the same option)');
  });
});

describe('train --init on numeric data', () => {
  it('grows the output layer to label ids past the model\'s last', async () => {
    const D = (await Network.load(f('num.sl'))).config.inputDim;
    writeFileSync(f('grow.xc'), `3 ${D} 14\n12 0:1\n13 1:1\n0 2:1\n`);
    const r = run('train', '--init', f('num.sl'), '--train', f('grow.xc'), '--epochs', '1', '--workers', '1', '--save', f('num2.sl'));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain(`warm start from ${f('num.sl')}: 12 labels, grown to 14 (2 new)`);
    expect((await Network.load(f('num2.sl'))).config.layers.at(-1)!.size).toBe(14);
    const c = run('train', '--init', f('num.sl'), '--train', f('grow.xc'), '--config', f('grow.xc'));
    expect(c.code).toBe(2);
    expect(c.stderr).toContain('--init cannot be combined with --config: the network comes from the --init model');
  });
});

describe('train --resume of a text run', () => {
  it('refits the same vectorizer and names from the recorded training file', async () => {
    const ck = f('ckpt');
    const a = run('train', '--train', f('train.txt'), '--input-format', 'text', '--min-df', '1', '--epochs', '1', '--workers', '1', '--checkpoint', ck, '--quiet');
    expect(a.code, a.stderr).toBe(0);
    const r = run('train', '--resume', ck, '--epochs', '2', '--save', f('resumed.sl'), '--quiet');
    expect(r.code, r.stderr).toBe(0);
    const first = await Network.load(f('m.sl')), resumed = await Network.load(f('resumed.sl'));
    expect(resumed.labelNames).toEqual(first.labelNames);
    expect(resumed.textVectorizer!.vocabulary).toEqual(first.textVectorizer!.vocabulary);
    expect(resumed.textVectorizer!.options.minDf).toBe(1);
  });
});
