// Small CLI defects that misled users: binary bytes echoed to the terminal, a FIFO that blocks silently
// (train and data inspect), --epochs 0, --lr 0 and --propensity-a 0, config files with a byte order mark,
// an absurd epoch count or training options only, eval's default cut-offs and predict's default --k on a
// small model, --mode sampled on a dense output layer (CLI and library), 0-based LIBSVM training data, a
// last layer wider than the labels, a text file whose vocabulary --min-df empties, and a failed write to
// stdout (predict > /dev/full). Spawns the compiled CLI (`npm test` builds it).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { assertBuilt, CLI, ROOT } from './built.js';
import { readXC } from '../../src/datasets/xc-reader.js';
import * as api from '../../src/index.js';
import { sampledModeNote } from '../../src/network/network.js';

const dir = mkdtempSync(join(tmpdir(), 'sublinear-edges-'));
const tiny = join(ROOT, 'datasets/fixtures/tiny.txt');
beforeAll(() => assertBuilt(['src/cli', 'src/util', 'src/train']));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function run(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', cwd: dir, timeout: 120_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}
const usage = (msg: string) => `sublinear train: ${msg}\nRun 'sublinear train --help' for usage.\n`;

describe('messages', () => {
  it('escape the control characters of the data they quote', () => {
    writeFileSync(join(dir, 'esc.txt'), '1 2000 100\n0 1:\x1b[31mred\x07\n');
    const r = run('train', '--train', 'esc.txt', '--save', 'm.sl');
    expect(r.stderr).toBe("sublinear: esc.txt:2: non-numeric value '\\x1b[31mred\\x07' in feature '1:\\x1b[31mred\\x07'\n");
    writeFileSync(join(dir, 'bin.txt'), Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0, 0x0d, 0x0a]));
    const b = run('train', '--train', 'bin.txt', '--save', 'm.sl');
    expect(b.stderr).toBe("sublinear: bin.txt:1: bad header '\\x7fELF\\x02\\x01\\x01\\x00': expected \"points features labels\" (3 non-negative integers)\n");
  });

  it('readXC names a missing file; Network.load\'s error class is exported', async () => {
    await expect(readXC(join(dir, 'nope.txt'))).rejects.toThrow(`cannot read ${join(dir, 'nope.txt')}: no such file or directory`);
    await expect(readXC(join(dir, 'nope.txt'))).rejects.toMatchObject({ code: 'ENOENT', path: join(dir, 'nope.txt') });
    writeFileSync(join(dir, 'junk.sl'), 'not a model');
    await expect(api.Network.load(join(dir, 'junk.sl'))).rejects.toBeInstanceOf(api.BinFileError);
  });
});

describe('--max-memory counts the reader\'s buffers', () => {
  it('a line longer than a chunk grows them: a limit just under the real need is refused naming them, and train plans them', async () => {
    // A 10 MB line (mostly spaces) in a tiny data set: the 8 MiB read buffers must grow to hold it.
    const f = join(dir, 'long-line.txt');
    writeFileSync(f, `3 100 5\n0 1:1\n1 2:1${' '.repeat(10_000_000)}3:1\n2 4:1\n`);
    const stats = { bufferBytes: 0 };
    await readXC(f, { stats });
    expect(stats.bufferBytes).toBeGreaterThan(2 * 10_000_000);
    // The least limit the read needs (buffers and data), found by bisection on the reader the CLI uses.
    let lo = 0, hi = 256e6;
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2);
      if (await readXC(f, { maxMemoryBytes: mid }).then(() => true, () => false)) hi = mid;
      else lo = mid;
    }
    expect(hi).toBeGreaterThan(stats.bufferBytes);
    const under = run('train', '--train', f, '--save', 'll.sl', '--epochs', '1', '--max-memory', String(hi - 1));
    expect(under.code).toBe(1);
    expect(under.stderr).toMatch(new RegExp(`^sublinear: ${f.replace(/[.*+?^\${}()|[\]\\/]/g, '\\$&')}: cannot be read within the memory limit: (the read buffers need [\\d.]+ MB|.* besides [\\d.]+ MB of read buffers)`));
    // Room to read, not to train: the plan names the read buffers (freed only at a collection) first.
    // (A middle layer: layer 0 holds the rows of the 4 features the data holds only.)
    writeFileSync(join(dir, 'll.json'), JSON.stringify({ layers: [{ size: 2000 }, { size: 300 }, { size: 5 }] }));
    const plan = run('train', '--train', f, '--save', 'll.sl', '--epochs', '1', '--workers', '1', '--config', 'll.json', '--max-memory', String(hi + 1000));
    expect(plan.code).toBe(1);
    const mb = (b: number) => `${(b / 1e6).toPrecision(3)} MB`;
    expect(plan.stderr).toMatch(new RegExp(`^sublinear: Not enough memory: the configuration needs [\\d.]+ MB \\(read buffers ${mb(stats.bufferBytes).replace('.', '\\.')}, .* but the limit is [\\d.]+ MB \\(--max-memory\\)\n$`));
  });
});

describe('train refuses what would waste a run', () => {
  it('--epochs 0 and --lr 0 are usage errors naming the flag', () => {
    expect(run('train', '--train', tiny, '--epochs', '0')).toMatchObject({ code: 2, stderr: usage('option --epochs must be >= 1 but received 0') });
    expect(run('train', '--train', tiny, '--lr', '0')).toMatchObject({ code: 2, stderr: usage('option --lr must be > 0 but received 0') });
  });

  it('a config file: a byte order mark is accepted, an epoch count the flag refuses is refused too', () => {
    writeFileSync(join(dir, 'bom.json'), '\ufeff' + JSON.stringify({ layers: [{ size: 8 }, { size: 100 }], epochs: 1 }));
    expect(run('train', '--train', tiny, '--config', 'bom.json', '--save', 'bom.sl', '--quiet')).toMatchObject({ code: 0, stderr: '' });
    writeFileSync(join(dir, 'big.json'), JSON.stringify({ layers: [{ size: 8 }, { size: 100 }], epochs: 1e9 }));
    expect(run('train', '--train', tiny, '--config', 'big.json')).toMatchObject({ code: 1, stderr: 'sublinear: big.json: Expected integer in [1, 1000000] for epochs but received 1000000000\n' });
    expect(run('train', '--train', tiny, '--epochs', '1000000000').stderr).toBe(usage('option --epochs must be <= 1000000 but received 1000000000'));
  });

  it('a config file of training options only trains the default network for the data', () => {
    writeFileSync(join(dir, 'opts.json'), JSON.stringify({ epochs: 2, lr: 0.002, seed: 5 }));
    const r = run('train', '--train', tiny, '--config', 'opts.json', '--save', 'opts.sl', '--quiet', '--json');
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    expect(JSON.parse(r.stdout.trim().split('\n').at(-1)!)).toMatchObject({ epochs: 2 });
    // The same network as without --config (the defaults for 2000 features and 100 labels, seed 5).
    const info = run('info', 'opts.sl', '--json');
    expect(JSON.parse(info.stdout)).toMatchObject({ inputFeatures: 2000, config: { seed: 5, layers: [{ size: 1024 }, { size: 100 }] } });
    // inputDim alone, without layers, is a mistake, not a default.
    writeFileSync(join(dir, 'dim.json'), JSON.stringify({ inputDim: 3000, epochs: 1 }));
    expect(run('train', '--train', tiny, '--config', 'dim.json')).toMatchObject({
      code: 1, stderr: 'sublinear: dim.json: "inputDim" without "layers": give the layers too, or leave both out for the default network of the data\n',
    });
  });

  it('--propensity-a and --propensity-b must be > 0: a usage error naming the flag, before training', () => {
    expect(run('train', '--train', tiny, '--test', tiny, '--propensity-a', '0')).toMatchObject({ code: 2, stderr: usage('option --propensity-a must be > 0 but received 0') });
    expect(run('eval', '--model', 'x.sl', '--test', tiny, '--propensity-b', '-1')).toMatchObject({
      code: 2, stderr: "sublinear eval: option --propensity-b must be > 0 but received -1\nRun 'sublinear eval --help' for usage.\n",
    });
  });

  it('a text file whose words are all rarer than --min-df: says so, naming the file and the flag', () => {
    writeFileSync(join(dir, 'sample.txt'), 'sports\tthe match ended late\nnews\ta storm hit the coast\nsports,news\tcoach speaks\n');
    const msg = 'sublinear: sample.txt: the vocabulary is empty: no word occurs in 3 or more of its 3 points (--min-df 3; the default is 2); ' +
      'give a lower --min-df (1 keeps every word) or more text\n';
    expect(run('train', '--train', 'sample.txt', '--input-format', 'text', '--min-df', '3', '--save', 'v.sl')).toMatchObject({ code: 1, stderr: expect.stringContaining(msg) });
    expect(run('data', 'featurize', '--train', 'sample.txt', '--min-df', '3', '--out', 'feat')).toMatchObject({ code: 1, stderr: msg });
    // 'the' is in two texts: the default --min-df 2 keeps it.
    expect(run('train', '--train', 'sample.txt', '--input-format', 'text', '--epochs', '1', '--save', 'v.sl', '--quiet').code).toBe(0);
  });

  it('warns about a last layer wider than the labels', () => {
    writeFileSync(join(dir, 'wide.json'), JSON.stringify({ layers: [{ size: 8 }, { size: 150 }], epochs: 1 }));
    const r = run('train', '--train', tiny, '--config', 'wide.json', '--save', 'wide.sl', '--quiet');
    expect(r.code).toBe(0);
    expect(r.stderr).toBe(`sublinear: warning: the network's last layer has 150 neurons but ${tiny} has 100 labels: outputs 100..149 are never a true label ` +
      'and only learn to score low (make the last layer 100)\n');
  });

  it('reads 0-based LIBSVM training data with --zero-based, as its error suggests', () => {
    writeFileSync(join(dir, 'z.svm'), '1 0:1 3:2\n0 1:1 2:1\n1 0:0.5\n0,1 4:1\n');
    const one = run('train', '--train', 'z.svm', '--format', 'libsvm', '--epochs', '1', '--save', 'z.sl', '--quiet');
    expect(one.stderr).toBe('sublinear: z.svm:1: feature id 0 in a file read with 1-based feature ids (give --zero-based if its ids start at 0)\n');
    expect(run('train', '--train', 'z.svm', '--format', 'libsvm', '--zero-based', '--epochs', '1', '--save', 'z.sl', '--quiet')).toMatchObject({ code: 0, stderr: '' });
    const e = run('eval', '--model', 'z.sl', '--test', 'z.svm', '--format', 'libsvm', '--zero-based', '--json');
    expect(e.code).toBe(0);
    expect(run('train', '--train', tiny, '--zero-based').stderr).toBe(usage('--zero-based applies to --format libsvm only'));
  });
});

describe('eval and predict', () => {
  it('eval\'s default cut-offs stop at a small model\'s labels; --mode sampled on a dense output layer says so', () => {
    writeFileSync(join(dir, 'three.txt'), '4 5 3\n0 0:1\n1 1:1\n2 2:1\n0,1 3:1\n');
    expect(run('train', '--train', 'three.txt', '--epochs', '1', '--save', 'three.sl', '--quiet').code).toBe(0);
    const e = run('eval', '--model', 'three.sl', '--test', 'three.txt', '--json');
    expect(e.code).toBe(0);
    const m = JSON.parse(e.stdout) as Record<string, number>;
    expect(Object.keys(m).filter((k) => /^p\d+$/.test(k))).toEqual(['p1', 'p3']);
    const s = run('eval', '--model', 'three.sl', '--test', 'three.txt', '--mode', 'sampled', '--json');
    expect(s.stderr).toBe('sublinear: warning: --mode sampled: the output layer of three.sl is dense (not LSH-sampled), so every output is scored, as in --mode exact\n');
    const p = run('predict', '--model', 'three.sl', '--input', 'three.txt', '--mode', 'sampled', '--quiet');
    expect(p.stderr).toBe('sublinear: warning: --mode sampled: the output layer of three.sl is dense (not LSH-sampled), so every output is scored, as in --mode exact\n');
  });

  it('predict\'s default --k 5 stops at a smaller model\'s labels; a --k given above them is refused', () => {
    const p = run('predict', '--model', 'three.sl', '--input', 'three.txt');
    expect({ code: p.code, stderr: p.stderr }).toEqual({ code: 0, stderr: '' });
    const lines = p.stdout.trim().split('\n');
    expect(lines[0]).toBe('4 3');
    expect(lines.slice(1).map((l) => l.split(' ').length)).toEqual([3, 3, 3, 3]);
    expect(run('predict', '--model', 'three.sl', '--input', 'three.txt', '--k', '4')).toMatchObject({
      code: 2, stderr: "sublinear predict: option --k 4 exceeds the model's 3 labels\nRun 'sublinear predict --help' for usage.\n",
    });
  });

  it('Network.predict in sampled mode on a dense output layer warns through onWarning (stderr by default)', async () => {
    const net = await api.Network.load(join(dir, 'three.sl'));
    const data = await readXC(join(dir, 'three.txt'));
    const warnings: string[] = [];
    const p = await net.predict(data, { k: 3, mode: 'sampled', workers: 0, onWarning: (m) => warnings.push(m) });
    expect(p.outputsScoredPerPoint).toBe(3);
    expect(warnings).toEqual(['the output layer is dense (not LSH-sampled), so every output is scored, as in exact mode']);
    expect(warnings[0]).toBe(sampledModeNote(net.config));
    await net.predict(data, { k: 3, mode: 'exact', workers: 0, onWarning: (m) => warnings.push(m) });
    expect(warnings).toHaveLength(1);
  });

  it('a failed write to stdout (predict > /dev/full) ends with a message and exit 1, not a stack trace', () => {
    const full = openSync('/dev/full', 'w');
    try {
      const r = spawnSync(process.execPath, [CLI, 'predict', '--model', 'three.sl', '--input', 'three.txt'], { cwd: dir, encoding: 'utf8', stdio: ['ignore', full, 'pipe'] });
      expect({ code: r.status, stderr: r.stderr }).toEqual({ code: 1, stderr: 'sublinear: cannot write to standard output: no space left on device; the output is incomplete\n' });
    } finally {
      closeSync(full);
    }
  });
});

describe('a FIFO as input', () => {
  it('says it is waiting for the writer, then reads it', async () => {
    const fifo = join(dir, 'in.fifo');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const child = spawn(process.execPath, [CLI, 'train', '--train', fifo, '--epochs', '1', '--save', 'f.sl'], { cwd: dir });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((res) => child.on('exit', res));
    for (let i = 0; i < 500 && !stderr.includes('waiting'); i++) await new Promise((r) => setTimeout(r, 10));
    expect(stderr).toBe(`reading training data from the pipe ${fifo} (waiting for its writer)\n`);
    writeFileSync(fifo, readFileSync(tiny)); // opens the FIFO for writing: the reader goes on
    expect(await exited).toBe(0);
  });

  it('data inspect says it is waiting for the writer too', async () => {
    const fifo = join(dir, 'inspect.fifo');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const child = spawn(process.execPath, [CLI, 'data', 'inspect', fifo, '--json'], { cwd: dir });
    let stderr = '', stdout = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.stdout.on('data', (d) => (stdout += d));
    const exited = new Promise<number | null>((res) => child.on('exit', res));
    for (let i = 0; i < 500 && !stderr.includes('waiting'); i++) await new Promise((r) => setTimeout(r, 10));
    expect(stderr).toBe(`reading ${fifo} from a pipe (waiting for its writer)\n`);
    writeFileSync(fifo, readFileSync(tiny));
    expect(await exited).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({ points: 20, labels: 100 });
  });
});
