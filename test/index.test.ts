// The package's public API (src/index.ts): exactly the runtime names listed here, each documented with an
// example in its doc comment. A name added to src/index.ts fails this test until it is reviewed and added
// below: every exported name is a promise kept across versions.
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import * as api from '../src/index.js';

const PUBLIC = [
  // jobs
  'train', 'evaluate', 'plan',
  // the model
  'Network', 'defaultConfig', 'serve', 'OnlineLearner', 'LshIndex',
  // data
  'readXC', 'writeXC', 'readLibsvm', 'readText', 'readSplit', 'subset', 'synthesize',
  // errors
  'UsageError', 'ConfigError', 'DataFormatError', 'BinFileError', 'MemoryLimitError', 'OutputCheckError', 'DivergedError',
  'CheckpointFormatError', 'DirectoryLockedError', 'RequestError',
];

const ROOT = join(import.meta.dirname, '..');

const programs = new Map<string, ts.Program>();

/** The doc comment of the declaration of `name`, exported by `module` (followed to where it is declared). */
function docOf(name: string, module = 'src/index.ts'): string {
  const path = join(ROOT, module);
  if (!programs.has(module)) {
    programs.set(module, ts.createProgram([path], { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022, strict: true, types: [], noResolve: false }));
  }
  const program = programs.get(module)!;
  const checker = program.getTypeChecker();
  const sym = checker.getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(path)!)!).find((s) => s.name === name)!;
  const target = sym.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(sym) : sym;
  const decl = target.declarations![0]!;
  const text = decl.getSourceFile().getFullText();
  return ts.getLeadingCommentRanges(text, decl.getFullStart())?.map((r) => text.slice(r.pos, r.end)).join('\n') ?? '';
}

describe('the public API (src/index.ts)', () => {
  it('exports exactly the reviewed runtime names', () => {
    expect(Object.keys(api).sort()).toEqual([...PUBLIC].sort());
    expect(PUBLIC.length).toBeLessThanOrEqual(25);
  });

  it('documents each with an example in its doc comment', () => {
    const undocumented = PUBLIC.filter((name) => !/@example\s+\*\s+```ts/.test(docOf(name)));
    expect(undocumented).toEqual([]);
  });

  it('the check of doc comments sees an example, and a doc comment without one', () => {
    expect(docOf('LshIndex')).toMatch(/@example\s+\*\s+```ts/);
    const internal = docOf('holdoutSize', 'src/train/early-stop.ts');
    expect(internal).toContain('/**');
    expect(internal).not.toMatch(/@example\s+\*\s+```ts/);
  });
});
