// Guard shared by the CLI tests, which spawn the compiled CLI: refuse to run against a missing or stale
// dist/ (a stale build would test old code). `npm test` compiles before running vitest.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

export const ROOT = join(import.meta.dirname, '../..');
export const CLI = join(ROOT, 'dist/src/cli.js');

/** Throws unless dist/src/cli.js exists and every .ts file of `sourceDirs` is older than its build. */
export function assertBuilt(sourceDirs: readonly string[]): void {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: build first (npx tsc -p .; npm test does it)`);
  for (const src of sourceDirs) {
    for (const f of readdirSync(join(ROOT, src)).filter((x) => x.endsWith('.ts'))) {
      const built = join(ROOT, 'dist', src, f.replace(/\.ts$/, '.js'));
      if (!existsSync(built) || statSync(built).mtimeMs < statSync(join(ROOT, src, f)).mtimeMs) {
        throw new Error(`${built} is older than ${src}/${f}: rebuild first (npx tsc -p .; npm test does it)`);
      }
    }
  }
}
