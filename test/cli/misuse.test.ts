// The misuse examples a new user hits: each must fail at once (exit 1 or 2) with a message naming what is
// wrong, before any data is read or any model trained: config typos, unwritable outputs, directories given
// as files, a learning rate that blows the weights up. Spawns the compiled CLI (`npm test` builds it).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, CLI, ROOT } from './built.js';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { listCheckpoints } from '../../src/train/checkpoint.js';
import { Network } from '../../src/network/network.js';

let dir: string;
let trainFile: string;
let testFile: string;
/** A file whose second line is malformed: a command that reads it fails with `bad.txt:2:`. */
let badData: string;
beforeAll(async () => {
  assertBuilt(['src/cli', 'src/train', 'src/network', 'datasets']);
  dir = await mkdtemp(join(tmpdir(), 'sublinear-misuse-'));
  expect(run('data', 'synth', '--shape', 'tiny', '--train', '1500', '--test', '200', '--seed', '3', '--out', dir).code).toBe(0);
  trainFile = join(dir, 'train.txt');
  testFile = join(dir, 'test.txt');
  badData = join(dir, 'bad.txt');
  writeFileSync(badData, '2 10 5\n0 1:1\nnot data\n');
  mkdirSync(join(dir, 'adir'));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

function run(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', cwd: dir ?? ROOT });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function config(name: string, obj: unknown): string {
  const p = join(dir, name);
  writeFileSync(p, JSON.stringify(obj));
  return p;
}

describe('the --config file has one strict schema', () => {
  it('refuses an unknown key anywhere with its path and a did-you-mean, before reading data', () => {
    const cases: [unknown, string][] = [
      [{ layers: [{ size: 64, activaton: 'linear' }, { size: 100 }] }, 'Unknown option layers[0].activaton (did you mean layers[0].activation?)'],
      [{ layers: [{ size: 64 }, { size: 100, sampling: { hash: 'dwta', bugdet: 5 } }] }, 'Unknown option layers[1].sampling.bugdet (did you mean layers[1].sampling.budget?)'],
      [{ layer: [{ size: 64 }, { size: 100 }] }, 'Unknown option layer (did you mean layers?)'],
      [{ layers: [{ size: 64 }, { size: 100 }], epoch: 3 }, 'Unknown option epoch (did you mean epochs?)'],
      [{ layers: [{ size: 64 }, { size: 100 }], validation: { patiense: 2 } }, 'Unknown option validation.patiense (did you mean validation.patience?)'],
      [{ layers: [{ size: 64 }, { size: 100 }], rebuild: { frist: 2 } }, 'Unknown option rebuild.frist (did you mean rebuild.first?)'],
      [{ layers: [{ size: 64 }, { size: 100 }], lr: -1 }, 'Expected number in (0, inf) for lr but received -1'],
    ];
    for (const [i, [obj, message]] of cases.entries()) {
      const c = config(`typo${i}.json`, obj);
      // badData would fail with bad.txt:3 if it were read: the config is checked first.
      const r = run('train', '--train', badData, '--config', c);
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 1, stderr: `sublinear: ${c}: ${message}\n` });
    }
  });

  it('honours the training options in the file; flags override them', () => {
    const c = config('train-opts.json', { layers: [{ size: 32 }, { size: 100 }], epochs: 2, batchSize: 50, lr: 0.002 });
    const r = run('train', '--train', trainFile, '--config', c, '--json');
    expect(r.code).toBe(0);
    const j = JSON.parse(r.stdout.trim().split('\n').at(-1)!);
    expect([j.epochs, j.batchesDone]).toEqual([2, 2 * Math.ceil(1500 / 50)]);
    const o = run('train', '--train', trainFile, '--config', c, '--epochs', '1', '--batch', '100', '--json');
    const k = JSON.parse(o.stdout.trim().split('\n').at(-1)!);
    expect([k.epochs, k.batchesDone]).toEqual([1, Math.ceil(1500 / 100)]);
  });
});

describe('paths are checked before any data is read', () => {
  it.each([
    [['--save', '/nonexistent/dir/model.sl'], '--save /nonexistent/dir/model.sl: directory /nonexistent/dir does not exist'],
    [['--save', 'adir'], '--save adir: is a directory, expected a file name'],
    [['--log', 'adir'], '--log adir: is a directory, expected a file name'],
    [['--checkpoint', 'bad.txt'], '--checkpoint bad.txt is not a directory'],
    [['--checkpoint', 'bad.txt/ck'], '--checkpoint bad.txt/ck cannot be created: DIR/bad.txt is not a directory'],
    [['--test', 'adir'], '--test adir: is a directory, expected a file'],
    [['--test', 'missing.txt'], '--test missing.txt: no such file or directory'],
  ])('train %j', (flags, message) => {
    const r = run('train', '--train', 'bad.txt', ...flags);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 1, stderr: `sublinear: ${message.replace('DIR', dir)}\n` });
  });

  it('a directory given as data names the path', () => {
    expect(run('train', '--train', 'adir').stderr).toBe('sublinear: --train adir: is a directory, expected a file\n');
    expect(run('data', 'inspect', 'adir').stderr).toBe(`sublinear: adir: is a directory\n`);
    expect(run('eval', '--model', 'adir', '--test', testFile).stderr).toBe('sublinear: --model adir: is a directory, expected a file\n');
  });
});

describe('a diverging run stops', () => {
  it('exits 1 naming the batch and suggesting a lower lr; keeps the last good checkpoint; saves no model', async () => {
    const ck = join(dir, 'ck-diverge');
    const model = join(dir, 'diverged.sl');
    const r = run('train', '--train', trainFile, '--epochs', '3', '--lr', '1e9', '--workers', '0', '--checkpoint', ck, '--checkpoint-every', '1', '--save', model);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/sublinear: training diverged: the mean loss of batch \d+ of epoch 1 is [\d.e+]+; the learning rate 1000000000 is too high for this data: try a lower one \(e\.g\. 100000000\)\n$/);
    expect(existsSync(model)).toBe(false);
    const files = await listCheckpoints(ck);
    expect(files.length).toBeGreaterThan(0);
    // The newest checkpoint predates the diverged batch: its weights are finite.
    const net = await Network.load(files[0]!.file);
    const last = net.spec.layers.at(-1)!;
    expect(last.weights.every(Number.isFinite)).toBe(true);
  });
});

describe('a closed stderr', () => {
  it('does not end a training run: the model is saved and the exit status is 0', () => {
    const model = join(dir, 'stderr-closed.sl');
    // head takes the first byte of stderr and exits: every later message meets a closed pipe.
    const r = spawnSync('bash', ['-c', `set -o pipefail; "${process.execPath}" "${CLI}" train --train "${trainFile}" --epochs 2 --save "${model}" 2>&1 >/dev/null | head -c 1 >/dev/null`], { encoding: 'utf8' });
    expect(r.status).toBe(0);
    expect(existsSync(model)).toBe(true);
  });
});

