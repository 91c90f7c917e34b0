// `sublinear bench`: runs bench/compare (sublinear against dense TensorFlow.js and PyTorch).
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { packageRoot } from '../util/package-root.js';
import { defineCommand } from './args.js';

const BASELINE_PACKAGES = ['@tensorflow/tfjs', '@tensorflow/tfjs-backend-wasm'];

/** Whether `name` resolves from the benchmark scripts' location (as their imports will). */
function resolvable(name: string): boolean {
  try {
    createRequire(join(packageRoot(), 'dist', 'bench', 'compare.js')).resolve(name);
    return true;
  } catch {
    return false;
  }
}

export const benchCmd = defineCommand({
  name: 'bench',
  summary: 'Benchmark sublinear against dense TensorFlow.js and PyTorch baselines (same data and network).',
  description:
    'Writes bench/results/<dataset>.json and .svg (P@1 against training time). The default run takes about ' +
    '10 minutes on 2 cores; --full runs longer. Needs the devDependencies (@tensorflow/tfjs, ' +
    '@tensorflow/tfjs-backend-wasm) and, for the PyTorch row, Debian python3-torch.',
  flags: {
    full: { type: 'boolean', description: 'longer runs' },
    datasets: { type: 'string', valueName: 'list', description: 'comma-separated: delicious, amazon-tta, amazon-670k (default: all available)' },
    dataDir: {
      type: 'string', valueName: 'dir',
      description: 'folder holding delicious/ (Delicious_train.txt, Delicious_test.txt) from the Extreme Classification Repository, ' +
        'http://manikvarma.org/downloads/XC/XMLRepository.html (default: $SUBLINEAR_DATASETS)',
    },
    workers: { type: 'integer', min: 1, valueName: 'n', description: 'sublinear worker threads (default 1)' },
    verbose: { type: 'boolean', description: 'show progress of each run' },
    json: { type: 'boolean', description: 'print only the JSON summary (the last stdout line)' },
  },
  examples: ['bench', 'bench --datasets amazon-670k --json'],
  async run(o, io) {
    const script = join(packageRoot(), 'dist', 'bench', 'compare.js');
    // The npm package leaves the benchmarks out (package.json's files): they run from a clone.
    if (!existsSync(script)) throw new Error(`${script} not found: the benchmarks are not part of the npm package; run them from a clone of the repository (npm install, then npm run bench)`);
    // The baselines are devDependencies: an installed package lacks them unless the user adds them.
    const missing = BASELINE_PACKAGES.filter((p) => !resolvable(p));
    if (missing.length) {
      throw new Error(`the benchmark baselines need ${missing.join(' and ')} (devDependencies of sublinear): run it from a clone of the repository after \`npm install\`, or \`npm install ${missing.join(' ')}\` next to sublinear`);
    }
    const args = [script];
    if (o.full) args.push('--full');
    if (o.datasets) args.push('--datasets', o.datasets);
    if (o.dataDir) args.push('--data-dir', o.dataDir);
    if (o.workers) args.push('--workers', String(o.workers));
    if (o.verbose) args.push('--verbose');
    if (o.json) args.push('--json');
    return new Promise<number>((resolve) => {
      const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
      child.stdout.on('data', (d: Buffer) => io.out(d.toString()));
      child.on('close', (code) => resolve(code ?? 1));
    });
  },
});
