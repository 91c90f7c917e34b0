// Runs a benchmark script in a child process and returns its last stdout line parsed as JSON.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { packageRoot } from '../src/util/package-root.js';

export function runBenchChild<T>(script: string, args: string[], verbose = false): Promise<T> {
  const file = join(packageRoot(), 'dist', 'bench', script);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [file, ...args], { stdio: ['ignore', 'pipe', verbose ? 'inherit' : 'pipe'] });
    let out = '', err = '';
    child.stdout!.on('data', (d) => (out += d));
    child.stderr?.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`${script} ${args.join(' ')} exited with ${code}: ${err.trim().slice(-2000)}`));
      const last = out.trim().split('\n').at(-1) ?? '';
      try {
        resolve(JSON.parse(last) as T);
      } catch {
        reject(new Error(`${script}: last line is not JSON: ${last.slice(0, 200)}`));
      }
    });
  });
}
