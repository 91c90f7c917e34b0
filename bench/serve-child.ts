// `sublinear serve` (the real command) in a child process on a free loopback port, for the benchmarks and
// fuzzers that drive it over HTTP (bench/serve.ts, bench/fuzz-http.ts).
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { packageRoot } from '../src/util/package-root.js';

/** Starts `sublinear serve --model <model> --port 0 --quiet <args>`; resolves with it and its URL once it listens. */
export function startServer(model: string, args: readonly string[]): Promise<{ child: ChildProcess; url: string }> {
  const argv = [join(packageRoot(), 'dist', 'src', 'cli.js'), 'serve', '--model', model, '--port', '0', '--quiet', ...args];
  const child = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /^listening on (http:\S+)\n/.exec(out);
      if (m) resolve({ child, url: m[1]! });
    });
    child.on('exit', (code) => reject(new Error(`sublinear serve exited with code ${code} before listening`)));
  });
}
