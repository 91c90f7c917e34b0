// The anchors of bench:accuracy: the CPU extreme classifiers XC practitioners compare with, run from
// the command line when they are installed on the machine (none ships with sublinear):
// - omikuji (Parabel/Bonsai in Rust): `omikuji train` / `omikuji test` on PATH; reads the XC files as they are;
// - PECOS XR-Linear (Amazon): `python -m pecos.xmc.xlinear.train` / `.predict` from a Python that can
//   import `pecos.xmc.xlinear` (with numpy, scipy and scikit-learn); needs scipy .npz matrices, which a
//   small Python helper here writes from the XC files, with L2-normalised rows as PECOS's maintainers
//   prepare tf-idf (binary rows are L2-normalised too);
// - napkinXC PLT: `nxc train` / `nxc test` on PATH; reads the XC files as they are (it L2-normalises rows
//   itself by default);
// - one-vs-rest logistic regression (scikit-learn's LogisticRegression, liblinear, C = 1, one per label,
//   ranked by its decision function) on L2-normalised rows, from a Python that imports scikit-learn and
//   scipy: the per-label linear model small sets are judged against. It trains one classifier per label
//   over every training point, so it runs only up to OVR_MAX_COST labels x training points.
// Each runs at its library defaults with the given thread count. Predictions come back as the top 5
// labels per test point and are scored here, by the same P@k as sublinear's (a test point without labels
// counts as a miss). Times are wall clocks of each command (reading, training or predicting, saving);
// peak memory is the largest VmHWM seen while it runs (polled from /proc every 50 ms).
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { computeMetrics, NO_PREDICTION } from '../src/network/metrics.js';
import type { SparseDataset } from '../src/datasets/index.js';

/** The anchors, by the names bench:accuracy's --systems takes. */
export const ANCHORS = ['omikuji', 'pecos', 'napkinxc', 'ovr-lr'] as const;
export type AnchorName = (typeof ANCHORS)[number];

/** The anchors' names in the results, in the order of ANCHORS. */
export const ANCHOR_TITLES = ['omikuji Parabel', 'PECOS XR-Linear', 'napkinXC PLT', 'one-vs-rest LR'] as const;

/** A measured anchor run (or why there is none). */
export interface AnchorResult {
  name: string;
  p1: number | null;
  p3: number | null;
  p5: number | null;
  /** Wall seconds of the training command (reading, training, saving). */
  trainSeconds: number | null;
  /** Wall seconds of the prediction command (loading the model, reading, predicting, writing). */
  predictSeconds: number | null;
  /** Peak RSS of the training command, MiB (the larger of training and prediction). */
  peakRssMB: number | null;
  note?: string;
  skipped?: string;
  error?: string;
}

// ---- parsing predictions (pure; unit-tested on fixtures) ----

/**
 * Parses one prediction line per test point into a (points x k) row-major array of label ids, padded
 * with NO_PREDICTION. `sep` splits a line into (label, score) items and `pair` splits an item.
 * Throws naming `what`, the line and the problem on a malformed line or the wrong number of lines.
 */
function parseScored(text: string, points: number, k: number, what: string, items: RegExp, pair: string): Uint32Array {
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  if (lines.length !== points) throw new Error(`${what}: ${lines.length} prediction lines for ${points} test points`);
  const top = new Uint32Array(points * k).fill(NO_PREDICTION);
  for (let i = 0; i < points; i++) {
    let j = 0;
    for (const item of lines[i]!.split(items)) {
      if (item === '') continue;
      if (j >= k) break;
      const at = item.indexOf(pair);
      const label = at < 0 ? '' : item.slice(0, at), score = at < 0 ? '' : item.slice(at + 1);
      if (!/^\d+$/.test(label) || !Number.isFinite(Number(score)) || score === '') {
        throw new Error(`${what}, line ${i + 1}: expected 'label${pair}score' but found '${item.slice(0, 40)}'`);
      }
      top[i * k + j++] = Number(label);
    }
  }
  return top;
}

/** omikuji test --out_path: per point `label score<TAB>label score...` (best first; empty when none). */
export function parseOmikujiPredictions(text: string, points: number, k: number): Uint32Array {
  return parseScored(text, points, k, 'omikuji predictions', /\t/, ' ');
}

/** nxc test --prediction (and the PECOS helper here): per point `label:score label:score ` (best first). */
export function parseNapkinPredictions(text: string, points: number, k: number, what = 'napkinXC predictions'): Uint32Array {
  return parseScored(text, points, k, what, / +/, ':');
}

/** P@1, P@3, P@5 of top-5 predictions against a test set. */
export function scoreTop5(top: Uint32Array, test: SparseDataset): { p1: number; p3: number; p5: number } {
  const m = computeMetrics({ topIdx: top, kMax: 5, labelOffsets: test.labelOffsets, labelIndices: test.labelIndices, ks: [1, 3, 5] });
  return { p1: m['p1']!, p3: m['p3']!, p5: m['p5']! };
}

// ---- finding the tools ----

function runs(cmd: string, args: string[]): { ok: boolean; out: string } {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 60_000 });
  if (r.error) return { ok: false, out: (r.error as NodeJS.ErrnoException).code ?? r.error.message };
  return { ok: r.status === 0, out: `${r.stdout ?? ''}${r.stderr ?? ''}` };
}

/** Why an anchor cannot run here, or null when it can. `python` is the interpreter for PECOS. */
export function anchorMissing(name: AnchorName, python: string): string | null {
  switch (name) {
    case 'omikuji':
      return runs('omikuji', ['--version']).ok ? null : 'omikuji not found on PATH (build omikuji 0.5.1 with its CLI feature)';
    case 'napkinxc':
      return runs('nxc', ['--help']).out.includes('Usage: nxc') ? null : 'nxc (napkinXC) not found on PATH';
    case 'pecos': {
      const r = runs(python, ['-c', 'import pecos.xmc.xlinear, scipy.sparse, sklearn']);
      return r.ok ? null : `${python} cannot import pecos.xmc.xlinear (with scipy and scikit-learn): ${r.out.trim().split('\n').at(-1) ?? ''}`;
    }
    case 'ovr-lr': {
      const r = runs(python, ['-c', 'import scipy.sparse, sklearn.linear_model']);
      return r.ok ? null : `${python} cannot import scikit-learn and scipy: ${r.out.trim().split('\n').at(-1) ?? ''}`;
    }
  }
}

/**
 * One-vs-rest trains a classifier per label over every training point: above this many labels x training
 * points it would take minutes to hours (Delicious, 983 x 12,920, is past it; the 1,000-point subsamples are not).
 */
export const OVR_MAX_COST = 2_000_000;

/** Why one-vs-rest LR is not run on a training set of this shape, or null when it is. */
export function ovrTooLarge(points: number, labels: number): string | null {
  return labels * points > OVR_MAX_COST
    ? `one classifier per label over every training point: ${labels.toLocaleString('en-US')} labels x ${points.toLocaleString('en-US')} points is over ${OVR_MAX_COST.toLocaleString('en-US')}`
    : null;
}

/** The first of `candidates` that can import PECOS, else the first one (whose failure then says why). */
export function findPython(candidates: string[]): string {
  for (const c of candidates) if (runs(c, ['-c', 'import pecos.xmc.xlinear, scipy.sparse, sklearn']).ok) return c;
  return candidates[0]!;
}

// ---- running ----

/** Peak RSS (VmHWM) of a running process in MiB, or 0 once it is gone. */
export function vmHwmMB(pid: number): number {
  try {
    const m = /^VmHWM:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round(Number(m[1]) / 1024) : 0;
  } catch {
    return 0;
  }
}

export interface Measured {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderrTail: string;
  wallSeconds: number;
  /** Highest VmHWM seen (sampled every 50 ms while it runs). */
  peakRssMB: number;
}

/** Runs a program, sampling its peak RSS from /proc while it runs; `nice` > 0 runs it under nice. */
export function runMeasured(
  cmd: string, args: string[],
  opts: {
    keepStdout?: boolean; verbose?: boolean; env?: NodeJS.ProcessEnv;
    /** With `verbose`, print the command line first. Default true. */
    echo?: boolean;
    /** Called with each stderr chunk, the seconds since the start and the stderr tail before the chunk. */
    onStderr?: (chunk: string, seconds: number, tailBefore: string) => void;
  } = {},
): Promise<Measured> {
  return new Promise((resolvePromise, reject) => {
    const t0 = performance.now();
    if (opts.verbose && opts.echo !== false) process.stderr.write(`  $ ${cmd} ${args.join(' ')}\n`);
    const child = spawn(cmd, args, { stdio: ['ignore', opts.keepStdout ? 'pipe' : 'ignore', 'pipe'], env: opts.env ?? process.env });
    let stdout = '', tail = '', peak = 0;
    const poll = setInterval(() => {
      if (child.pid) peak = Math.max(peak, vmHwmMB(child.pid));
    }, 50);
    child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => {
      const text = d.toString();
      opts.onStderr?.(text, (performance.now() - t0) / 1000, tail);
      tail = (tail + text).slice(-4000);
      if (opts.verbose) process.stderr.write(d);
    });
    child.on('error', (e) => {
      clearInterval(poll);
      reject(e);
    });
    child.on('close', (code, signal) => {
      clearInterval(poll);
      resolvePromise({ code, signal, stdout, stderrTail: tail, wallSeconds: (performance.now() - t0) / 1000, peakRssMB: peak });
    });
  });
}

const lastLine = (s: string) => s.split(/[\r\n]/).map((l) => l.trim()).filter(Boolean).at(-1) ?? '';
const failedRun = (what: string, r: Measured) => `${what} exit ${r.code ?? r.signal}: ${lastLine(r.stderrTail).slice(0, 300)}`;

const empty = (name: string): AnchorResult => ({ name, p1: null, p3: null, p5: null, trainSeconds: null, predictSeconds: null, peakRssMB: null });

/** What one anchor run needs. */
export interface AnchorJob {
  train: string;
  test: string;
  /** The test set, read (for scoring). */
  testData: SparseDataset;
  /** A scratch folder for models, matrices and predictions. */
  work: string;
  threads: number;
  python: string;
  verbose: boolean;
}

/** Trains and tests one anchor; failures come back as `error`, never thrown. */
export async function runAnchor(name: AnchorName, job: AnchorJob): Promise<AnchorResult> {
  const title = ANCHOR_TITLES[ANCHORS.indexOf(name)]!;
  try {
    switch (name) {
      case 'omikuji': return await runOmikuji(title, job);
      case 'pecos': return await runPecos(title, job);
      case 'napkinxc': return await runNapkin(title, job);
      case 'ovr-lr': return await runOvr(title, job);
    }
  } catch (e) {
    return { ...empty(title), error: e instanceof Error ? e.message : String(e) };
  }
}

async function runOmikuji(title: string, j: AnchorJob): Promise<AnchorResult> {
  const model = join(j.work, 'omikuji-model'), pred = join(j.work, 'omikuji-pred.txt');
  const t = await runMeasured('omikuji', ['train', '--model_path', model, '--n_threads', String(j.threads), j.train], { verbose: j.verbose });
  if (t.code !== 0) return { ...empty(title), error: failedRun('omikuji train', t) };
  const p = await runMeasured('omikuji', ['test', '--n_threads', String(j.threads), '--k_top', '5', '--out_path', pred, model, j.test], { verbose: j.verbose });
  if (p.code !== 0) return { ...empty(title), error: failedRun('omikuji test', p) };
  const m = scoreTop5(parseOmikujiPredictions(readFileSync(pred, 'latin1'), j.testData.points, 5), j.testData);
  return {
    name: title, ...m, trainSeconds: t.wallSeconds, predictSeconds: p.wallSeconds, peakRssMB: Math.max(t.peakRssMB, p.peakRssMB) || null,
    note: `defaults (3 trees, balanced 2-means, max depth 20, hinge C=1, beam 10), ${j.threads} threads`,
  };
}

async function runNapkin(title: string, j: AnchorJob): Promise<AnchorResult> {
  const model = join(j.work, 'nxc-model'), pred = join(j.work, 'nxc-pred.txt');
  const t = await runMeasured('nxc', ['train', '-i', j.train, '-o', model, '--threads', String(j.threads)], { verbose: j.verbose });
  if (t.code !== 0) return { ...empty(title), error: failedRun('nxc train', t) };
  const p = await runMeasured('nxc', ['test', '-i', j.test, '-o', model, '--threads', String(j.threads), '--topK', '5', '--prediction', pred], { verbose: j.verbose });
  if (p.code !== 0) return { ...empty(title), error: failedRun('nxc test', p) };
  const m = scoreTop5(parseNapkinPredictions(readFileSync(pred, 'latin1'), j.testData.points, 5), j.testData);
  return {
    name: title, ...m, trainSeconds: t.wallSeconds, predictSeconds: p.wallSeconds, peakRssMB: Math.max(t.peakRssMB, p.peakRssMB) || null,
    note: `defaults (PLT, hierarchical 2-means tree, <= 100 leaves, logistic C=10), ${j.threads} threads`,
  };
}

/**
 * The Python helper: `xc2npz <xc> <X.npz> <Y.npz>` (rows L2-normalised) and `top <pred.npz> <out.txt> <k>`
 * (per row `label:score ` best first). Written into the work folder at run time.
 */
export const PECOS_HELPER = `import sys
import numpy as np
import scipy.sparse as sp

def xc2npz(path, xout, yout):
    with open(path, 'r', encoding='latin-1') as f:
        head = f.readline().split()
        n, d, L = int(head[0]), int(head[1]), int(head[2])
        xi, xj, xv, yi, yj = [], [], [], [], []
        row = 0
        for lineno, line in enumerate(f, start=2):
            line = line.rstrip('\\n')
            if not line.strip() and not line.startswith(' '):
                continue
            parts = line.split(' ')
            try:
                if parts[0]:
                    for l in parts[0].split(','):
                        yi.append(row); yj.append(int(l))
                for t in parts[1:]:
                    if not t:
                        continue
                    a, b = t.split(':')
                    xi.append(row); xj.append(int(a)); xv.append(float(b))
            except ValueError:
                sys.exit('%s, line %d: expected "l1,l2 f:v f:v ..." but found %r' % (path, lineno, line[:60]))
            row += 1
    if row != n:
        sys.exit('%s: header says %d points but found %d' % (path, n, row))
    X = sp.csr_matrix((np.asarray(xv, dtype=np.float32), (np.asarray(xi), np.asarray(xj))), shape=(n, d), dtype=np.float32)
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    norms[norms == 0] = 1
    X = sp.csr_matrix(sp.diags(1 / norms).dot(X), dtype=np.float32)
    X.sort_indices()
    Y = sp.csr_matrix((np.ones(len(yi), dtype=np.float32), (np.asarray(yi), np.asarray(yj))), shape=(n, L), dtype=np.float32)
    Y.sort_indices()
    sp.save_npz(xout, X)
    sp.save_npz(yout, Y)

def top(pred, out, k):
    P = sp.load_npz(pred).tocsr()
    with open(out, 'w') as f:
        for i in range(P.shape[0]):
            a, b = P.indptr[i], P.indptr[i + 1]
            idx, val = P.indices[a:b], P.data[a:b]
            order = np.argsort(-val, kind='stable')[:k]
            f.write(''.join('%d:%.6g ' % (idx[o], val[o]) for o in order) + '\\n')

if sys.argv[1] == 'xc2npz':
    xc2npz(sys.argv[2], sys.argv[3], sys.argv[4])
elif sys.argv[1] == 'top':
    top(sys.argv[2], sys.argv[3], int(sys.argv[4]))
`;

async function runPecos(title: string, j: AnchorJob): Promise<AnchorResult> {
  const helper = join(j.work, 'pecos_helper.py');
  writeFileSync(helper, PECOS_HELPER);
  const X = join(j.work, 'pecos-X.npz'), Y = join(j.work, 'pecos-Y.npz');
  const Xt = join(j.work, 'pecos-Xt.npz'), Yt = join(j.work, 'pecos-Yt.npz');
  const model = join(j.work, 'pecos-model'), pred = join(j.work, 'pecos-pred.npz'), predTxt = join(j.work, 'pecos-pred.txt');
  for (const [src, x, y] of [[j.train, X, Y], [j.test, Xt, Yt]] as const) {
    const c = await runMeasured(j.python, [helper, 'xc2npz', src, x, y], { verbose: j.verbose });
    if (c.code !== 0) return { ...empty(title), error: failedRun(`converting ${src} to .npz`, c) };
  }
  const t = await runMeasured(j.python, ['-m', 'pecos.xmc.xlinear.train', '-x', X, '-y', Y, '-m', model, '--threads', String(j.threads)], { verbose: j.verbose });
  if (t.code !== 0) return { ...empty(title), error: failedRun('pecos.xmc.xlinear.train', t) };
  const p = await runMeasured(j.python, ['-m', 'pecos.xmc.xlinear.predict', '-x', Xt, '-m', model, '-o', pred, '--threads', String(j.threads)], { verbose: j.verbose });
  if (p.code !== 0) return { ...empty(title), error: failedRun('pecos.xmc.xlinear.predict', p) };
  const d = await runMeasured(j.python, [helper, 'top', pred, predTxt, '5'], { verbose: j.verbose });
  if (d.code !== 0) return { ...empty(title), error: failedRun('reading the PECOS predictions', d) };
  const m = scoreTop5(parseNapkinPredictions(readFileSync(predTxt, 'latin1'), j.testData.points, 5, 'PECOS predictions'), j.testData);
  return {
    name: title, ...m, trainSeconds: t.wallSeconds, predictSeconds: p.wallSeconds, peakRssMB: Math.max(t.peakRssMB, p.peakRssMB) || null,
    note: `defaults (PIFA, 16 splits, leaves <= 100, L2R_L2LOSS_SVC_DUAL, beam 10) on L2-normalised rows, ${j.threads} threads; .npz conversion not timed`,
  };
}

/**
 * The one-vs-rest helper: `train <xc> <model>` reads an XC file, L2-normalises its rows, fits one
 * LogisticRegression (liblinear, C = 1) per label that has training points and pickles the weights;
 * `predict <xc> <model> <out.txt> <k>` writes per test row `label:score ` best first (decision values).
 * Written into the work folder at run time; uses PECOS_HELPER's reader.
 */
export const OVR_HELPER = `import sys, pickle
import numpy as np
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression

def read(path):
    with open(path, 'r', encoding='latin-1') as f:
        head = f.readline().split()
        n, d, L = int(head[0]), int(head[1]), int(head[2])
        xi, xj, xv, ys = [], [], [], []
        for row, line in enumerate(f):
            parts = line.rstrip('\\n').split(' ')
            ys.append([int(l) for l in parts[0].split(',')] if parts[0] else [])
            for t in parts[1:]:
                if t:
                    a, b = t.split(':')
                    xi.append(row); xj.append(int(a)); xv.append(float(b))
    if len(ys) != n:
        sys.exit('%s: header says %d points but found %d' % (path, n, len(ys)))
    X = sp.csr_matrix((np.asarray(xv, dtype=np.float64), (np.asarray(xi), np.asarray(xj))), shape=(n, d))
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    norms[norms == 0] = 1
    return sp.csr_matrix(sp.diags(1 / norms).dot(X)), ys, L

if sys.argv[1] == 'train':
    X, ys, L = read(sys.argv[2])
    Y = sp.csc_matrix((np.ones(sum(map(len, ys))), ([i for i, ls in enumerate(ys) for _ in ls], [l for ls in ys for l in ls])), shape=(X.shape[0], L))
    W, b, labels = [], [], []
    for l in range(L):
        y = (Y[:, l].toarray().ravel() > 0).astype(np.int8)
        if y.sum() == 0:
            continue
        if y.sum() == len(y):
            W.append(np.zeros(X.shape[1])); b.append(1e9); labels.append(l); continue
        m = LogisticRegression(solver='liblinear', C=1.0).fit(X, y)
        W.append(m.coef_.ravel()); b.append(m.intercept_[0]); labels.append(l)
    with open(sys.argv[3], 'wb') as f:
        pickle.dump((np.array(W).T, np.array(b), np.array(labels)), f)
elif sys.argv[1] == 'predict':
    X, _, _ = read(sys.argv[2])
    with open(sys.argv[3], 'rb') as f:
        W, b, labels = pickle.load(f)
    k = int(sys.argv[5])
    S = np.asarray(X.dot(W)) + b
    with open(sys.argv[4], 'w') as f:
        for i in range(S.shape[0]):
            order = np.argsort(-S[i], kind='stable')[:k]
            f.write(''.join('%d:%.6g ' % (labels[o], S[i, o]) for o in order) + '\\n')
`;

async function runOvr(title: string, j: AnchorJob): Promise<AnchorResult> {
  const helper = join(j.work, 'ovr_helper.py'), model = join(j.work, 'ovr-model.pkl'), pred = join(j.work, 'ovr-pred.txt');
  writeFileSync(helper, OVR_HELPER);
  const t = await runMeasured(j.python, [helper, 'train', j.train, model], { verbose: j.verbose });
  if (t.code !== 0) return { ...empty(title), error: failedRun('one-vs-rest LR training', t) };
  const p = await runMeasured(j.python, [helper, 'predict', j.test, model, pred, '5'], { verbose: j.verbose });
  if (p.code !== 0) return { ...empty(title), error: failedRun('one-vs-rest LR prediction', p) };
  const m = scoreTop5(parseNapkinPredictions(readFileSync(pred, 'latin1'), j.testData.points, 5, 'one-vs-rest LR predictions'), j.testData);
  return {
    name: title, ...m, trainSeconds: t.wallSeconds, predictSeconds: p.wallSeconds, peakRssMB: Math.max(t.peakRssMB, p.peakRssMB) || null,
    note: 'scikit-learn LogisticRegression (liblinear, C=1) per label on L2-normalised rows, ranked by decision value; one thread',
  };
}
