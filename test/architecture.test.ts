// The shape of src/: imports point down the layers of .dependency-cruiser.cjs and form no circle
// (dependency-cruiser, run as `npx depcruise src` would run it; the rules are also run on a small tree
// made here with an upward import and a circle, so this test is seen to fail when the code breaks them),
// and the command line stays a thin shell: no function in src/cli/ is longer than CLI_FUNCTION_LINES.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import ts from 'typescript';
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

/** The longest a function of src/cli/ may be: the CLI parses, calls the job layer and prints. */
const CLI_FUNCTION_LINES = 80;

/** Every function (declarations, methods, arrows) of a TypeScript source longer than `max` lines, as 'name (N lines)'. */
function longFunctions(file: string, text: string, max: number): string[] {
  const src = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true);
  const found: string[] = [];
  const visit = (n: ts.Node, name: string) => {
    let here = name;
    if (ts.isVariableDeclaration(n) || ts.isPropertyAssignment(n)) here = n.name.getText(src);
    if (ts.isFunctionDeclaration(n) || ts.isMethodDeclaration(n) || ts.isArrowFunction(n) || ts.isFunctionExpression(n) || ts.isConstructorDeclaration(n)) {
      const lines = src.getLineAndCharacterOfPosition(n.getEnd()).line - src.getLineAndCharacterOfPosition(n.getStart(src)).line + 1;
      const fn = (n as ts.FunctionLikeDeclaration).name?.getText(src) ?? here;
      if (lines > max) found.push(`${file}: ${fn} (${lines} lines)`);
    }
    ts.forEachChild(n, (c) => visit(c, here));
  };
  visit(src, '(anonymous)');
  return found;
}

describe('src/cli/', () => {
  it(`has no function over ${CLI_FUNCTION_LINES} lines`, () => {
    const dir = join(ROOT, 'src', 'cli');
    const long = readdirSync(dir).filter((f) => f.endsWith('.ts')).flatMap((f) => longFunctions(`src/cli/${f}`, readFileSync(join(dir, f), 'utf8'), CLI_FUNCTION_LINES));
    expect(long).toEqual([]);
  });

  it('the length check sees a long function, a long method and a long arrow', () => {
    const body = Array.from({ length: 90 }, (_, i) => `  x += ${i};`).join('\n');
    const text = `export function f(x = 0) {\n${body}\n  return x;\n}\nclass C { m(x = 0) {\n${body}\n  return x; } }\nexport const g = (x = 0) => {\n${body}\n  return x;\n};\n`;
    expect(longFunctions('t.ts', text, CLI_FUNCTION_LINES)).toEqual(['t.ts: f (93 lines)', 't.ts: m (92 lines)', 't.ts: g (93 lines)']);
  });
});
