// `sublinear demo`: trains and evaluates a network on a generated synthetic dataset.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateSynthetic } from '../datasets/index.js';
import type { NetworkConfig } from '../network/config.js';
import type { Out } from './engine.js';
import { trainCommand } from './train.js';

export interface DemoOptions {
  json?: boolean;
  quiet?: boolean;
  workers?: number;
  keep?: boolean;
}

/**
 * The built-in default job: generate a seeded synthetic extreme-classification dataset (the `small`
 * shape: 20,000 features, 2,000 labels) and train an LSH-sampled network on it, then evaluate.
 */
export async function demoCommand(o: DemoOptions, io: Out): Promise<number> {
  const dir = await mkdtemp(join(tmpdir(), 'sublinear-demo-'));
  try {
    if (!o.json && !o.quiet) io.err(`generating the synthetic 'small' dataset (20,000 features, 2,000 labels) in ${dir}\n`);
    await generateSynthetic({ shape: 'small', train: 20000, test: 2000, seed: 1, outDir: dir });
    const config: NetworkConfig = {
      inputDim: 20000,
      seed: 1,
      layers: [
        { size: 128, activation: 'relu' },
        { size: 2000, activation: 'softmax', sampling: { hash: 'dwta', K: 4, L: 32, budget: 100, minActive: 100, logQ: true } },
      ],
    };
    return await trainCommand({ train: join(dir, 'train.txt'), test: join(dir, 'test.txt'), networkConfig: config, epochs: 3, json: o.json, quiet: o.quiet, workers: o.workers, unsavedOk: true }, io);
  } finally {
    if (!o.keep) await rm(dir, { recursive: true, force: true });
  }
}
