// Every benchmark script parses its arguments with src/cli/args.ts (through bench/cli.ts): --help prints
// the generated help and exits 0 without starting the benchmark, and an unknown or malformed flag exits 2.
// The scripts are spawned from dist/ (`npm test` compiles first), all at once, so this stays fast.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '../..');

/** Every bench entry point (script path under dist/bench, without .js). */
const ENTRIES = ['accuracy', 'compare', 'dispatch', 'distributed-cost', 'engine', 'fuzz', 'fuzz-http', 'interrupt-resume', 'kernels', 'learn', 'lsh', 'reader', 'scaling', 'serve', 'text', 'train-run', 'baselines/measure'];

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runScript(entry: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  const file = join(ROOT, 'dist', 'bench', `${entry}.js`);
  if (!existsSync(file)) throw new Error(`${file} is missing: build first (npx tsc -p .; npm test does it)`);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [file, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    // --help and usage errors must not start the benchmark: anything still running after 20 s did.
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('bench scripts share the CLI argument parser', () => {
  it('covers every bench script named in package.json', () => {
    const scripts = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    const named = Object.values(scripts).flatMap((s) => [...s.matchAll(/dist\/bench\/([\w/-]+)\.js/g)].map((m) => m[1]!));
    expect(named.length).toBeGreaterThan(0);
    for (const n of named) expect(ENTRIES).toContain(n);
  });

  it('--help prints usage and exits 0; an unknown flag exits 2', async () => {
    const runs = await Promise.all(ENTRIES.map(async (e) => ({ e, help: await runScript(e, ['--help']), bad: await runScript(e, ['--no-such-flag']) })));
    for (const { e, help, bad } of runs) {
      expect(help.code, `${e} --help: ${help.stderr}`).toBe(0);
      expect(help.stdout, e).toMatch(/^Usage: .*\[options\]/);
      expect(help.stdout, e).toContain('-h, --help');
      expect(bad.code, `${e} --no-such-flag: ${bad.stderr}`).toBe(2);
      expect(bad.stderr, e).toMatch(/unknown option --no-such-flag\nRun '.* --help' for usage\.\n$/);
      expect(bad.stdout, e).toBe('');
    }
  }, 60_000);

  it('rejects malformed values with exit code 2 before running', async () => {
    const [k, workers, targets] = await Promise.all([
      runScript('train-run', ['--K', '0']),
      runScript('scaling', ['--workers', '1,two']),
      runScript('fuzz', ['--targets', 'xc,nope']),
    ]);
    expect(k).toMatchObject({ code: 2, stdout: '' });
    expect(k.stderr).toContain('option --K must be >= 1 but received 0');
    expect(workers).toMatchObject({ code: 2, stdout: '' });
    expect(workers.stderr).toContain("option --workers expects comma-separated integers in [1, 256] but received '1,two'");
    expect(targets).toMatchObject({ code: 2, stdout: '' });
    expect(targets.stderr).toContain("unknown target 'nope' in --targets");
  });

  it('says where to get a missing real dataset and how to point the bench at it', async () => {
    const r = await runScript('compare', ['--datasets', 'delicious'], { SUBLINEAR_DATASETS: join(ROOT, 'no-such-folder') });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`missing ${join(ROOT, 'no-such-folder', 'delicious', 'Delicious_train.txt')}`);
    expect(r.stderr).toContain('Extreme Classification Repository (http://manikvarma.org/downloads/XC/XMLRepository.html)');
    expect(r.stderr).toContain('pass --data-dir <data dir> or set SUBLINEAR_DATASETS=<data dir>');
    expect(r.stderr).not.toContain('node_modules');
  });
});
