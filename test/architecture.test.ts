// The shape of src/: imports point down the layers of .dependency-cruiser.cjs and form no circle
// (dependency-cruiser, run as `npx depcruise src` would run it). The rules are also run on a small tree
// made here with an upward import and a circle, so this test is seen to fail when the code breaks them.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..');
const DEPCRUISE = join(ROOT, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');

interface Violation {
  from: string;
  to: string;
  rule: { name: string };
  cycle?: { name: string }[];
}

/** dependency-cruiser's violations of the repository's rules in `cwd`'s src/. */
function cruise(cwd: string): Violation[] {
  const r = spawnSync(process.execPath, [DEPCRUISE, 'src', '--config', join(ROOT, '.dependency-cruiser.cjs'), '--output-type', 'json'], {
    cwd, encoding: 'utf8', maxBuffer: 64 << 20,
  });
  if (r.status !== 0 && !r.stdout.startsWith('{')) throw new Error(`depcruise failed (${r.status}): ${r.stderr}`);
  return (JSON.parse(r.stdout) as { summary: { violations: Violation[] } }).summary.violations;
}

const work = mkdtempSync(join(tmpdir(), 'sublinear-layers-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('layers of src/', () => {
  it('import only down, and in no circle', () => {
    const found = cruise(ROOT).map((v) => `${v.rule.name}: ${v.from} -> ${v.to}${v.cycle ? ` (${v.cycle.map((c) => c.name).join(' -> ')})` : ''}`);
    expect(found).toEqual([]);
  });

  it('the rules catch an upward import, a sibling import, a circle and a module outside every layer', () => {
    const put = (path: string, text: string) => {
      mkdirSync(dirname(join(work, path)), { recursive: true });
      writeFileSync(join(work, path), text);
    };
    cpSync(join(ROOT, 'tsconfig.json'), join(work, 'tsconfig.json'));
    put('src/util/a.ts', 'export const a = 1;\n');
    put('src/network/model.ts', "import { fit } from '../train/fit.js';\nexport const model = fit;\n");
    put('src/train/fit.ts', "import { a } from '../util/a.js';\nexport const fit = a;\n");
    put('src/lsh/tables.ts', "import type { T } from '../text/words.js';\nexport type U = T;\n");
    put('src/text/words.ts', 'export type T = number;\n');
    put('src/job/one.ts', "import { two } from './two.js';\nexport const one = () => two();\n");
    put('src/job/two.ts', "import { one } from './one.js';\nexport const two = (): number => one();\n");
    put('src/extra/loose.ts', "import { a } from '../util/a.js';\nexport const b = a;\n");
    const found = cruise(work).map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`).sort();
    expect(found).toEqual([
      'lsh-imports-down: src/lsh/tables.ts -> src/text/words.ts',
      'network-imports-down: src/network/model.ts -> src/train/fit.ts',
      'no-circular: src/job/one.ts -> src/job/two.ts',
      'no-unlayered: src/extra/loose.ts -> src/util/a.ts',
    ]);
  });
});
