// PyTorch dense baseline, driven from TypeScript. The model and training loop live in
// bench/baselines/pytorch_dense.py (shipped with the package); this wrapper writes the CSR arrays to a
// temporary folder (raw little-endian files + header.json), runs `/usr/bin/python3 pytorch_dense.py`,
// forwards its JSON-line eval records to onEval and returns the same result shape as trainTfjs.
//
// PyTorch comes from Debian (`apt-get install python3-torch libopenblas0`); run with /usr/bin/python3,
// not a pyenv/venv python. Without libopenblas0 torch falls back to the slow reference BLAS.

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { endianness, tmpdir, availableParallelism } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { SparseDataset } from '../../src/datasets/csr.js';
import { packageRoot } from '../../src/util/package-root.js';
import { type BaselineOptions, type BaselineResult, type EvalRecord, resolveOptions } from './common.js';

/** Interpreter used by default: $SUBLINEAR_PYTHON, else Debian's /usr/bin/python3 (where apt's python3-torch lives). */
export const DEFAULT_PYTHON = process.env.SUBLINEAR_PYTHON || '/usr/bin/python3';

export interface PytorchOptions extends BaselineOptions {
  /** torch intra-op threads (default: all cores, os.availableParallelism()). */
  threads?: number;
  /** 'sparse_adam' (default): EmbeddingBag(sparse=True) + SparseAdam for the input layer, Adam for the
   * rest. 'adam': dense input-layer gradient, one Adam over everything. */
  embeddingOptimizer?: 'sparse_adam' | 'adam';
  /** Python interpreter (default $SUBLINEAR_PYTHON or /usr/bin/python3). */
  python?: string;
  /** Called with each line the script writes to stderr (warnings). */
  onStderr?: (line: string) => void;
}

export interface PytorchAvailability {
  ok: boolean;
  reason?: string;
  version?: string;
}

const availCache = new Map<string, PytorchAvailability>();

/** Whether `python -c "import torch"` works; the reason when it does not (for a table row). */
export function pytorchAvailable(python: string = DEFAULT_PYTHON): PytorchAvailability {
  const hit = availCache.get(python);
  if (hit) return hit;
  let r: PytorchAvailability;
  if (!existsSync(python)) r = { ok: false, reason: `not installed (${python} not found)` };
  else {
    const p = spawnSync(python, ['-c', 'import torch, numpy; print(torch.__version__)'], { encoding: 'utf8', timeout: 120_000 });
    if (p.error) r = { ok: false, reason: `not available (${p.error.message})` };
    else if (p.status !== 0) {
      const last = (p.stderr || '').trim().split('\n').pop() ?? '';
      r = { ok: false, reason: `not installed (${python} -c "import torch": ${last || `exit ${p.status}`}; apt-get install python3-torch libopenblas0)` };
    } else r = { ok: true, version: p.stdout.trim() };
  }
  availCache.set(python, r);
  return r;
}

/** Path of the Python training script inside the package. */
export function pytorchScriptPath(): string {
  return join(packageRoot(), 'bench', 'baselines', 'pytorch_dense.py');
}

function writeArray(dir: string, name: string, a: Uint32Array | Float32Array): string {
  writeFileSync(join(dir, name), new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
  return name;
}

/** Writes a dataset as raw little-endian arrays; returns its header entry. */
export function writeSplit(dir: string, prefix: string, ds: SparseDataset): Record<string, unknown> {
  if (endianness() !== 'LE') throw new Error('pytorch baseline: raw array hand-off assumes a little-endian host');
  return {
    points: ds.points, features: ds.features, labels: ds.labels,
    files: {
      offsets: writeArray(dir, `${prefix}.offsets.u32`, ds.offsets),
      indices: writeArray(dir, `${prefix}.indices.u32`, ds.indices),
      values: writeArray(dir, `${prefix}.values.f32`, ds.values),
      labelOffsets: writeArray(dir, `${prefix}.labelOffsets.u32`, ds.labelOffsets),
      labelIndices: writeArray(dir, `${prefix}.labelIndices.u32`, ds.labelIndices),
    },
  };
}

const num = (v: unknown): number => (typeof v === 'number' ? v : NaN);

/** Trains the PyTorch baseline in a child process; rejects if torch is missing or the script fails. */
export async function trainPytorch(opts: PytorchOptions): Promise<BaselineResult> {
  const o = resolveOptions(opts);
  const python = opts.python ?? DEFAULT_PYTHON;
  const avail = pytorchAvailable(python);
  if (!avail.ok) throw new Error(`pytorch baseline: ${avail.reason}`);
  const threads = opts.threads ?? availableParallelism();
  if (!Number.isInteger(threads) || threads <= 0) throw new Error(`Expected positive integer for threads but received ${threads}`);

  const dir = mkdtempSync(join(tmpdir(), 'sublinear-pytorch-'));
  try {
    const header = {
      train: writeSplit(dir, 'train', opts.train),
      test: opts.test ? writeSplit(dir, 'test', opts.test) : null,
    };
    writeFileSync(join(dir, 'header.json'), JSON.stringify(header));
    const fin = (x: number) => (Number.isFinite(x) ? String(x) : 'inf');
    const args = [
      pytorchScriptPath(), '--data', dir,
      '--hidden', o.hidden.join(','),
      '--epochs', fin(o.epochs), '--max-batches', fin(o.maxBatches), '--max-seconds', fin(o.maxSeconds),
      '--batch-size', String(o.batchSize), '--lr', String(o.lr),
      '--beta1', String(o.beta1), '--beta2', String(o.beta2), '--eps', String(o.eps),
      '--seed', String(o.seed),
      '--eval-every-batches', fin(o.evalEveryBatches), '--eval-every-seconds', fin(o.evalEverySeconds),
      '--eval-points', String(o.evalPoints), '--final-eval-points', String(o.finalEvalPoints),
      '--eval-at-start', o.evalAtStart ? '1' : '0',
      '--threads', String(threads),
      '--embedding-optimizer', opts.embeddingOptimizer ?? 'sparse_adam',
      '--warmup-batches', String(o.warmupBatches),
    ];
    // Pin BLAS/OpenMP pools to the requested thread count as well (torch.set_num_threads covers ATen).
    const env = { ...process.env, OMP_NUM_THREADS: String(threads), OPENBLAS_NUM_THREADS: String(threads) };
    const child = spawn(python, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
    let done: Record<string, unknown> | undefined;
    let start: Record<string, unknown> | undefined;
    const stderrTail: string[] = [];
    const errLines = createInterface({ input: child.stderr });
    errLines.on('line', (line) => {
      stderrTail.push(line);
      if (stderrTail.length > 40) stderrTail.shift();
      opts.onStderr?.(line);
    });
    const outLines = createInterface({ input: child.stdout });
    let callbackError: unknown;
    outLines.on('line', (line) => {
      let msg: Record<string, unknown>;
      try {
        msg = JSON.parse(line) as Record<string, unknown>;
      } catch {
        stderrTail.push(`[stdout] ${line}`);
        return;
      }
      if (msg.event === 'start') start = msg;
      else if (msg.event === 'eval') {
        const rec: EvalRecord = {
          seconds: num(msg.seconds), samples: num(msg.samples), batches: num(msg.batches),
          p1: num(msg.p1), loss: num(msg.loss),
        };
        try {
          opts.onEval?.(rec);
        } catch (e) {
          callbackError ??= e;
        }
      } else if (msg.event === 'done') done = msg;
    });
    const code = await new Promise<number | null>((resolve, reject) => {
      child.on('error', reject);
      child.on('close', (c) => resolve(c));
    });
    if (callbackError) throw callbackError;
    if (code !== 0 || !done)
      throw new Error(`pytorch baseline: ${python} pytorch_dense.py exited with ${code}:\n${stderrTail.join('\n')}`);
    const curve = (done.curve as { seconds: number; samples: number; p1: number }[]).map((c) => ({
      seconds: c.seconds, samples: c.samples, p1: num(c.p1),
    }));
    return {
      system: 'pytorch',
      samplesPerSec: num(done.samplesPerSec),
      steadySamplesPerSec: num(done.steadySamplesPerSec),
      seconds: num(done.seconds),
      batchSeconds: Array.isArray(done.batchSeconds) ? (done.batchSeconds as number[]) : [],
      samples: num(done.samples),
      batches: num(done.batches),
      finalP1: num(done.finalP1),
      curve,
      diverged: done.diverged === true,
      finalLoss: num(done.finalLoss),
      evalSeconds: num(done.evalSeconds),
      peakRssBytes: num(done.peakRssBytes),
      info: {
        torchVersion: String(done.torch ?? start?.torch ?? avail.version),
        threads: num(done.threads),
        optimizer: done.embeddingOptimizer === 'adam' ? 'torch.optim.Adam (dense)' : 'SparseAdam (input layer) + Adam',
        embeddingOptimizer: String(done.embeddingOptimizer),
      },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
