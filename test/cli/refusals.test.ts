// The CLI refuses hostile or useless inputs with exit 1 and a message naming the file: crafted model
// files with valid checksums (refused before anything is allocated, in well under 5 s), a model over
// --max-memory, a test file with no points or no labels, training data with no labels. Spawns the
// compiled CLI (`npx tsc -p .` first; `npm test` does it).
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeCrafted, type CraftedFile } from '../../bench/fuzz-structured.js';
import { Network } from '../../src/network/network.js';
import { synthesize } from '../../src/datasets/synth.js';
import { writeXC } from '../../src/datasets/xc-writer.js';
import { readXC } from '../../src/datasets/xc-reader.js';
import { assertBuilt, CLI, ROOT } from './built.js';
import { fit } from '../../src/train/fit-network.js';

let dir: string;
let testFile: string;
beforeAll(async () => {
  assertBuilt(['src/cli', 'src/network', 'src/train', 'src/util']);
  dir = await mkdtemp(join(tmpdir(), 'sublinear-refusals-'));
  testFile = join(dir, 'x.txt');
  await writeFile(testFile, '1 10 20\n0 0:1 3:1\n');
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function run(...args: string[]): { code: number | null; stderr: string; ms: number } {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', cwd: ROOT });
  return { code: r.status, stderr: r.stderr, ms: performance.now() - t0 };
}

const modelMeta = (config: unknown) => ({ format: 'sublinear-model', config, batchesDone: 0, rebuildRound: 0, trainPoints: 0 });
const f32 = (name: string, n: number, v = 0.01) => ({ name, dtype: 'f32', length: n, data: new Uint8Array(new Float32Array(n).fill(v).buffer) });
const small = (sampling?: object) => ({ inputDim: 10, seed: 1, layers: [{ size: 4 }, { size: 20, ...(sampling ? { sampling } : {}) }] });
const sections = () => [f32('layer0.weights', 40), f32('layer0.bias', 4), f32('layer1.weights', 80), f32('layer1.bias', 20)];
const hiddenSampled = {
  inputDim: 10, seed: 1,
  layers: [{ size: 4 }, { size: 6, activation: 'relu', sampling: { hash: 'dwta', K: 2, L: 128, rangeBits: 24, binSize: 4 } }, { size: 20 }],
};
const hiddenSampledSections = () => [f32('layer0.weights', 40), f32('layer0.bias', 4), f32('layer1.weights', 24), f32('layer1.bias', 6), f32('layer2.weights', 120), f32('layer2.bias', 20)];

describe('eval and predict load a model for inference', () => {
  it('huge tables of a sampled output layer (L = 128, rangeBits = 24: 34 GB) are never allocated: predict runs in a small limit', async () => {
    const model = join(dir, 'huge-output-tables.sl');
    await writeFile(model, await encodeCrafted({ kind: 'model', meta: modelMeta(small({ hash: 'dwta', K: 2, L: 128, rangeBits: 24, binSize: 4 })), sections: sections() }));
    for (const mode of ['exact', 'sampled']) {
      const r = run('predict', '--model', model, '--input', testFile, '--mode', mode, '--max-memory', '200MB', '--quiet');
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    }
  });
});

describe('eval and predict refuse crafted models (valid checksums)', () => {
  const withNaN = sections();
  new Float32Array(withNaN[2]!.data.buffer)[7] = NaN;
  const cases: [string, CraftedFile, string][] = [
    ['inputDim 2^23 in a 224-byte file', { kind: 'model', meta: modelMeta({ inputDim: 2 ** 23, layers: [{ size: 128 }, { size: 10 }], seed: 1 }), sections: [] }, 'missing section "layer0.weights"'],
    // A sampled hidden layer's tables are built by sampled inference: planned (an output layer's never are).
    ['L = 128, rangeBits = 24 tables', { kind: 'model', meta: modelMeta(hiddenSampled), sections: hiddenSampledSections() },
      'Not enough memory: the configuration needs 34.4 GB (layer 1 hash tables 34.4 GB'],
    ['a NaN weight', { kind: 'model', meta: modelMeta(small()), sections: withNaN }, 'section "layer1.weights" holds a non-finite value (NaN) at index 7'],
    ['weights shorter than the config', { kind: 'model', meta: modelMeta({ ...small(), inputDim: 2 ** 20 }), sections: sections() },
      'section "layer0.weights" has 40 elements but the configuration needs 4194304'],
  ];
  it.each(cases)('%s: exit 1 naming the file, in under 5 s', async (_name, crafted, message) => {
    const model = join(dir, 'crafted.sl');
    await writeFile(model, await encodeCrafted(crafted));
    for (const cmd of [['eval', '--model', model, '--test', testFile, '--max-memory', '20GB'], ['predict', '--model', model, '--input', testFile, '--max-memory', '20GB']]) {
      const r = run(...cmd);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`sublinear: ${model}: ${message}`);
      expect(r.ms).toBeLessThan(5000);
    }
  });
});

describe('eval and predict read their input within what the model leaves of --max-memory', () => {
  it('a limit the input alone fits in, but not with the model, refuses the input', async () => {
    // A 2 MB model (2000 x 256 weights) and a test file whose reading needs several MB.
    const model = join(dir, 'two-mb.sl');
    await new Network({ inputDim: 2000, layers: [{ size: 256 }, { size: 100 }] }).save(model);
    const test = join(dir, 'many.txt');
    await writeXC(test, synthesize({ shape: 'tiny', points: 20000, seed: 6 }));
    // The least limit under which the input alone reads (its data and read buffers).
    let lo = 0, hi = 256e6;
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2);
      if (await readXC(test, { maxMemoryBytes: mid }).then(() => true, () => false)) hi = mid;
      else lo = mid;
    }
    const modelBytes = (await Network.load(model)).memoryBytes();
    expect(modelBytes).toBeGreaterThan(2e6);
    for (const cmd of [['eval', '--model', model, '--test', test], ['predict', '--model', model, '--input', test, '--k', '1']]) {
      // Enough for the model's plan and for the input alone, not for both.
      const r = run(...cmd, '--max-memory', String(hi + 1000));
      expect(r.code, cmd[0]).toBe(1);
      expect(r.stderr, cmd[0]).toMatch(new RegExp(`^sublinear: ${test.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: cannot be read within the memory limit: `));
      expect(run(...cmd, '--max-memory', String(hi + modelBytes + 1000)).code, cmd[0]).toBe(0);
    }
  });
});

describe('eval --max-memory and useless data files', () => {
  it('a real model over --max-memory; a test file with no points or no labels; training data with no labels', async () => {
    const data = synthesize({ shape: 'tiny', points: 50, seed: 2 });
    const train = join(dir, 'train.txt');
    await writeXC(train, data);
    const net = new Network({ inputDim: data.features, layers: [{ size: 8 }, { size: data.labels }] });
    await fit(net, data, { epochs: 1, workers: 0 });
    const model = join(dir, 'real.sl');
    await net.save(model);

    const big = run('eval', '--model', model, '--test', train, '--max-memory', '100kB');
    expect(big.code).toBe(1);
    expect(big.stderr).toMatch(new RegExp(`sublinear: ${model.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: Not enough memory: .* but the limit is 100 kB \\(--max-memory\\)`));

    const empty = join(dir, 'empty.txt');
    await writeFile(empty, `0 ${data.features} ${data.labels}\n`);
    const e = run('eval', '--model', model, '--test', empty);
    expect(e.code).toBe(1);
    expect(e.stderr).toContain(`sublinear: ${empty}: no points to evaluate`);

    const unlabelled = join(dir, 'unlabelled.txt');
    await writeFile(unlabelled, `2 ${data.features} ${data.labels}\n 0:1\n 3:1 5:2\n`);
    const u = run('eval', '--model', model, '--test', unlabelled);
    expect(u.code).toBe(1);
    expect(u.stderr).toContain(`sublinear: ${unlabelled}: no labels to evaluate against (2 points, none with a label)`);

    const t = run('train', '--train', unlabelled, '--epochs', '1');
    expect(t.code).toBe(1);
    expect(t.stderr).toContain(`sublinear: ${unlabelled}: no labels (2 points, none with a label): there is nothing to train on`);
    // The library says so too.
    await expect(fit(new Network({ inputDim: 10, layers: [{ size: 4 }, { size: 3 }] }), { ...synthesize({ shape: 'tiny', points: 0, seed: 1 }), features: 10, labels: 3 }, { epochs: 1 }))
      .rejects.toThrow('The training data has no labels (0 points, none with a label): there is nothing to train on');
    await expect(net.evaluate(synthesize({ shape: 'tiny', points: 0, seed: 1 }))).rejects.toThrow('Cannot evaluate on 0 points: the evaluation data is empty');
  });
});
