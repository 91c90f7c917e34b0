import { describe, expect, it } from 'vitest';
import {
  commandArgv, commandHelp, defineCommand, defineGroup, groupHelp, HELP, parseCommandArgs, UsageError, type CliIO,
} from '../../src/cli/args.js';
import { main } from '../../src/cli/main.js';

const cmd = defineCommand({
  name: 'fit',
  summary: 'Fit a thing.',
  positionals: [{ name: 'input', description: 'input file' }, { name: 'extra', description: 'optional', required: false }],
  flags: {
    epochs: { type: 'integer', min: 1, default: 3, description: 'passes' },
    lr: { type: 'number', min: 0, description: 'learning rate' },
    out: { type: 'string', required: true, short: 'o', valueName: 'dir', description: 'output' },
    mode: { type: 'choice', choices: ['exact', 'sampled'], default: 'exact', description: 'mode' },
    json: { type: 'boolean', description: 'json' },
    trainSplit: { type: 'string', description: 'kebab-case name' },
  },
  async run(o) {
    // Compile-time checks of the inferred option types.
    const e: number = o.epochs;
    const lr: number | undefined = o.lr;
    const m: 'exact' | 'sampled' = o.mode;
    const input: string = o.input;
    const extra: string | undefined = o.extra;
    const out: string = o.out;
    const json: boolean = o.json;
    return [e, lr, m, input, extra, out, json].length;
  },
});

function parse(...argv: string[]): Record<string, unknown> | typeof HELP {
  return parseCommandArgs(cmd.spec, argv);
}
function usage(...argv: string[]): string {
  try {
    parse(...argv);
  } catch (e) {
    expect(e).toBeInstanceOf(UsageError);
    return (e as Error).message;
  }
  throw new Error('expected a usage error');
}

describe('parseCommandArgs', () => {
  it('parses typed values, defaults, kebab-case names, --x=y, short flags and --', () => {
    expect(parse('in.txt', '--out', 'o', '--lr=0.5', '--train-split', 's.txt', '--json')).toEqual({
      input: 'in.txt', out: 'o', lr: 0.5, trainSplit: 's.txt', json: true, epochs: 3, mode: 'exact',
    });
    expect(parse('-o', 'dir', '--epochs', '7', '--mode', 'sampled', 'a', '--', '--weird')).toEqual({
      input: 'a', extra: '--weird', out: 'dir', epochs: 7, mode: 'sampled', json: false,
    });
    expect(parse('-odir', 'a')).toMatchObject({ out: 'dir' });
    expect(parse('a', '--out', 'x', '--lr', '-0')).toMatchObject({ lr: -0 }); // a dash-digit word is a value, not an option
  });

  it('returns HELP for -h/--help anywhere before --, even with other mistakes', () => {
    expect(parse('--help')).toBe(HELP);
    expect(parse('--bogus', '-h')).toBe(HELP);
    expect(parse('a', '--out', 'x', '--', '--help')).toMatchObject({ extra: '--help' });
  });

  it('reports usage mistakes precisely', () => {
    expect(usage('--out', 'x')).toBe('missing argument <input>');
    expect(usage('a')).toBe('missing required option --out');
    expect(usage('a', 'b', 'c', '--out', 'x')).toBe("unexpected argument 'c'");
    expect(usage('a', '--out', 'x', '--epoch', '2')).toBe('unknown option --epoch (did you mean --epochs?)');
    expect(usage('a', '--out', 'x', '-z')).toBe('unknown option -z');
    expect(usage('a', '--out', 'x', '--epochs', '0')).toBe('option --epochs must be >= 1 but received 0');
    expect(usage('a', '--out', 'x', '--epochs', '2.5')).toBe("option --epochs expects an integer but received '2.5'");
    expect(usage('a', '--out', 'x', '--lr', 'fast')).toBe("option --lr expects a number but received 'fast'");
    expect(usage('a', '--out', 'x', '--mode', 'fuzzy')).toBe("option --mode must be one of exact, sampled but received 'fuzzy'");
    expect(usage('a', '--out')).toBe('option --out needs a value');
    expect(usage('a', '--out', '--json')).toBe('option --out needs a value');
    expect(usage('a', '--out', 'x', '--json=yes')).toBe('option --json does not take a value');
    expect(usage('a', '--out', 'x', '--out', 'y')).toBe('option --out given more than once');
  });

  it('generates help from the spec', () => {
    const h = commandHelp(cmd, ['sublinear', 'fit']);
    expect(h).toMatch(/^Usage: sublinear fit \[options\] <input> \[extra\]\n\nFit a thing\.\n/);
    expect(h).toMatch(/--epochs <n> +passes \(default: 3\)/);
    expect(h).toMatch(/-o, --out <dir> +output \(required\)/);
    expect(h).toMatch(/--mode <exact\|sampled> +mode \(default: exact\)/);
    expect(h).toMatch(/--train-split <value> +kebab-case name/);
    expect(h).toMatch(/-h, --help +show this help/);
    const g = groupHelp(defineGroup('grp', 'A group.', [cmd]), ['sublinear', 'grp']);
    expect(g).toMatch(/^Usage: sublinear grp <command> \[options\]/);
    expect(g).toMatch(/^ {2}fit +Fit a thing\.$/m);
  });
});

describe('main (in process)', () => {
  function capture(): CliIO & { stdout: string; stderr: string } {
    const io = { stdout: '', stderr: '', out: (s: string) => void (io.stdout += s), err: (s: string) => void (io.stderr += s) };
    return io;
  }

  it('returns 0 for help, 2 for usage errors, 1 for runtime errors', async () => {
    let io = capture();
    expect(await main(['data', '--help'], io)).toBe(0);
    expect(io.stdout).toContain('inspect');
    io = capture();
    expect(await main(['data', 'inspect'], io)).toBe(2);
    expect(io.stderr).toBe("sublinear data inspect: missing argument <file>\nRun 'sublinear data inspect --help' for usage.\n");
    io = capture();
    expect(await main(['data', 'inspect', '/definitely/not/here.txt'], io)).toBe(1);
    expect(io.stderr).toBe('sublinear: /definitely/not/here.txt: no such file or directory\n');
  });
});

describe('flag names and commandArgv', () => {
  const caps = defineCommand({
    name: 'caps',
    summary: 'Flags whose keys start with a capital or hold one.',
    flags: {
      K: { type: 'integer', min: 1, default: 6, description: 'hashes' },
      simK: { type: 'integer', description: 'bits' },
      lr: { type: 'number', description: 'rate' },
      shape: { type: 'string', description: 'shape' },
      split: { type: 'boolean', description: 'split' },
      json: { type: 'boolean', description: 'json' },
    },
    run: async () => 0,
  });

  it('keeps a leading capital (--K) and kebab-cases the rest (--sim-k)', () => {
    expect(parseCommandArgs(caps.spec, ['--K', '4', '--sim-k', '12'])).toMatchObject({ K: 4, simK: 12 });
    expect(commandHelp(caps, ['caps'])).toMatch(/ --K <n> /);
    expect(() => parseCommandArgs(caps.spec, ['--k', '4'])).toThrow('unknown option --k');
  });

  it('commandArgv writes flags that parse back to the same options, leaving out false, undefined and omitted keys', () => {
    const values = parseCommandArgs(caps.spec, ['--K', '3', '--lr', '0.0001', '--shape', 'a b', '--split', '--json']) as Record<string, unknown>;
    const argv = commandArgv(caps.spec, values, ['json']);
    expect(argv).toEqual(['--K', '3', '--lr', '0.0001', '--shape', 'a b', '--split']);
    expect(parseCommandArgs(caps.spec, argv)).toEqual({ ...values, json: false });
    expect(parseCommandArgs(caps.spec, commandArgv(caps.spec, { lr: 1e-7 }))).toMatchObject({ lr: 1e-7 });
  });
});
