// The command-line framework: typed flag specs, a small argv parser, help text, command groups.
// No dependency (values are checked by src/util/parse-values.ts). A command declares its arguments once
// (`defineCommand`) and receives a typed options object; `--help` is generated from the same declaration,
// so help never drifts from what is parsed.
//
// Conventions: `--name value` or `--name=value`; boolean flags take no value; kebab-case on the command
// line maps to camelCase keys (`--train-split` -> `trainSplit`); `--` ends options; `-h`/`--help` anywhere
// (before `--`) prints help. Usage mistakes throw UsageError (exit code 2), everything else exit code 1.

import { integerValue, numberValue } from '../util/parse-values.js';
import { suggest } from '../util/suggest.js';
import { UsageError } from '../util/usage-error.js';

export { suggest };

/** Where commands write: `out` for results (stdout), `err` for messages and progress (stderr). */
export interface CliIO {
  out(text: string): void;
  err(text: string): void;
  /** Resolves once `out` can take more (backpressure of a pipe); absent: always. */
  drain?(): Promise<void>;
}

// A mistake in how the command was invoked (or in a job's options): printed with a pointer to --help, exit code 2.
export { UsageError };

interface FlagBase {
  /** One line for --help. */
  description: string;
  /** Single-letter alias, e.g. 'o' for -o. */
  short?: string;
}
/** `--flag`: true when present, false otherwise. */
export interface BooleanFlag extends FlagBase {
  type: 'boolean';
}
export interface StringFlag extends FlagBase {
  type: 'string';
  required?: boolean;
  default?: string;
  /** Placeholder in --help, e.g. 'dir'. Default 'value'. */
  valueName?: string;
}
export interface IntegerFlag extends FlagBase {
  type: 'integer';
  required?: boolean;
  default?: number;
  /** Inclusive bounds. */
  min?: number;
  max?: number;
  valueName?: string;
}
export interface NumberFlag extends FlagBase {
  type: 'number';
  required?: boolean;
  default?: number;
  /** Inclusive bounds. */
  min?: number;
  max?: number;
  /** Exclusive lower bound (a value must be greater), e.g. 0 for a positive number. */
  above?: number;
  valueName?: string;
}
export interface ChoiceFlag<C extends string = string> extends FlagBase {
  type: 'choice';
  choices: readonly C[];
  /** Appended to the error for a value not among `choices`, e.g. where a similar flag lives. */
  hint?: string;
  required?: boolean;
  default?: C;
}
export type FlagSpec = BooleanFlag | StringFlag | IntegerFlag | NumberFlag | ChoiceFlag;

export interface PositionalSpec {
  name: string;
  description: string;
  /** Default true. */
  required?: boolean;
}

type WithPresence<S, T> = S extends { required: true } ? T : S extends { default: unknown } ? T : T | undefined;
/** The parsed type of one flag. */
export type FlagValue<S> = S extends { type: 'boolean' }
  ? boolean
  : S extends { type: 'choice'; choices: readonly (infer C)[] }
    ? WithPresence<S, C>
    : S extends { type: 'string' }
      ? WithPresence<S, string>
      : S extends { type: 'integer' | 'number' }
        ? WithPresence<S, number>
        : never;
type PositionalValues<P extends readonly PositionalSpec[]> = {
  [E in P[number] as E['name']]: E extends { required: false } ? string | undefined : string;
};
/** The options object a command's `run` receives. */
export type ParsedOptions<F extends Record<string, FlagSpec>, P extends readonly PositionalSpec[]> = {
  [K in keyof F]: FlagValue<F[K]>;
} & PositionalValues<P>;

export interface CommandSpec<F extends Record<string, FlagSpec>, P extends readonly PositionalSpec[]> {
  /** The word that selects the command, e.g. 'inspect'. */
  name: string;
  /** One line, shown in the parent's command list and at the top of --help. */
  summary: string;
  /** Further paragraphs for --help. */
  description?: string;
  positionals?: P;
  /**
   * The words after `--`, handed on whole (a command that runs another one): `options[rest.name]` is a
   * string array (empty without `--`). Without it, words after `--` are positionals.
   */
  rest?: { name: string; description: string };
  flags: F;
  /** Example invocations (without the leading `sublinear`). */
  examples?: string[];
  run(options: ParsedOptions<F, P>, io: CliIO): Promise<number>;
}

/** A leaf command with its (type-erased) spec. */
export interface Command {
  kind: 'command';
  name: string;
  summary: string;
  spec: CommandSpec<Record<string, FlagSpec>, readonly PositionalSpec[]>;
}
/** A word that selects among subcommands (`sublinear data <inspect|split|synth>`). */
export interface CommandGroup {
  kind: 'group';
  name: string;
  summary: string;
  description?: string;
  commands: CommandNode[];
}
export type CommandNode = Command | CommandGroup;

/** Declares a leaf command; `const` inference keeps choice literals and positional names typed. */
export function defineCommand<const F extends Record<string, FlagSpec>, const P extends readonly PositionalSpec[] = []>(
  spec: CommandSpec<F, P>,
): Command {
  return { kind: 'command', name: spec.name, summary: spec.summary, spec: spec as unknown as Command['spec'] };
}

export function defineGroup(name: string, summary: string, commands: CommandNode[], description?: string): CommandGroup {
  return { kind: 'group', name, summary, commands, description };
}

/** Returned by parseCommandArgs when -h/--help was given. */
export const HELP = Symbol('help');

/** camelCase key -> kebab-case flag name; a key's first letter is kept as is (`K` -> `--K`, `simK` -> `--sim-k`). */
const kebab = (key: string): string => key.replace(/(?<=.)[A-Z]/g, (c) => `-${c.toLowerCase()}`);

/** Parses argv against a spec: returns the options object, or HELP. Throws UsageError. */
export function parseCommandArgs(
  spec: Command['spec'],
  argv: readonly string[],
): Record<string, unknown> | typeof HELP {
  const dashDash = argv.indexOf('--');
  const optionPart = dashDash < 0 ? argv : argv.slice(0, dashDash);
  if (optionPart.includes('-h') || optionPart.includes('--help')) return HELP;

  const flags = spec.flags;
  const byLong = new Map<string, string>();
  const byShort = new Map<string, string>();
  for (const [key, f] of Object.entries(flags)) {
    byLong.set(kebab(key), key);
    if (f.short) byShort.set(f.short, key);
  }
  const values: Record<string, unknown> = {};
  const positionals: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (i === dashDash) {
      if (spec.rest) values[spec.rest.name] = argv.slice(i + 1);
      else positionals.push(...argv.slice(i + 1));
      break;
    }
    let key: string | undefined;
    let shown: string;
    let inline: string | undefined;
    if (a.startsWith('--')) {
      const eq = a.indexOf('=');
      const name = eq < 0 ? a.slice(2) : a.slice(2, eq);
      inline = eq < 0 ? undefined : a.slice(eq + 1);
      shown = `--${name}`;
      key = byLong.get(name);
      if (!key) throw new UsageError(`unknown option ${shown}${suggest(name, [...byLong.keys()], '--')}`);
    } else if (a.length > 1 && a.startsWith('-') && !/^-[\d.]/.test(a)) {
      shown = a.slice(0, 2);
      key = byShort.get(a.slice(1, 2));
      if (!key) throw new UsageError(`unknown option ${shown}`);
      if (a.length > 2) inline = a.slice(2);
    } else {
      positionals.push(a);
      continue;
    }
    const f = flags[key]!;
    if (key in values) throw new UsageError(`option ${shown} given more than once`);
    if (f.type === 'boolean') {
      if (inline !== undefined) throw new UsageError(`option ${shown} does not take a value`);
      values[key] = true;
      continue;
    }
    let raw = inline;
    if (raw === undefined) {
      raw = argv[i + 1];
      if (raw === undefined || i + 1 === dashDash || raw.startsWith('--')) {
        throw new UsageError(`option ${shown} needs a value`);
      }
      i++;
    }
    values[key] = convert(f, raw, shown);
  }

  if (spec.rest && !(spec.rest.name in values)) values[spec.rest.name] = [];
  const posSpecs = spec.positionals ?? [];
  if (positionals.length > posSpecs.length) {
    throw new UsageError(`unexpected argument '${positionals[posSpecs.length]}'`);
  }
  posSpecs.forEach((p, i) => {
    if (i < positionals.length) values[p.name] = positionals[i];
    else if (p.required !== false) throw new UsageError(`missing argument <${p.name}>`);
  });
  for (const [key, f] of Object.entries(flags)) {
    if (key in values) continue;
    if (f.type === 'boolean') values[key] = false;
    else if (f.default !== undefined) values[key] = f.default;
    else if (f.required) throw new UsageError(`missing required option --${kebab(key)}`);
  }
  return values;
}

/**
 * The flags that parse back to `values` under `spec` (false and undefined are left out, as are the keys in
 * `omit` and positionals): for handing a command's options on to a child process.
 */
export function commandArgv(spec: Command['spec'], values: Record<string, unknown>, omit: readonly string[] = []): string[] {
  const out: string[] = [];
  for (const [key, f] of Object.entries(spec.flags)) {
    const v = values[key];
    if (omit.includes(key) || v === undefined || v === false) continue;
    if (f.type === 'boolean') out.push(`--${kebab(key)}`);
    else out.push(`--${kebab(key)}`, String(v));
  }
  return out;
}

function convert(f: Exclude<FlagSpec, BooleanFlag>, raw: string, shown: string): string | number {
  switch (f.type) {
    case 'string':
      // `--save ""` (an unset shell variable) must not silently mean "no file".
      if (raw === '') throw new UsageError(`option ${shown} expects a value${f.valueName ? ` (<${f.valueName}>)` : ''} but received an empty string`);
      return raw;
    case 'choice':
      if (!f.choices.includes(raw)) {
        throw new UsageError(`option ${shown} must be one of ${f.choices.join(', ')} but received '${raw}'${f.hint ? ` (${f.hint})` : ''}`);
      }
      return raw;
    case 'integer':
    case 'number': {
      const v = f.type === 'integer' ? integerValue(raw) : numberValue(raw);
      if (v === undefined) {
        throw new UsageError(`option ${shown} expects ${f.type === 'integer' ? 'an integer' : 'a number'} but received '${raw}'`);
      }
      if (f.min !== undefined && v < f.min) throw new UsageError(`option ${shown} must be >= ${f.min} but received ${raw}`);
      if (f.type === 'number' && f.above !== undefined && !(v > f.above)) throw new UsageError(`option ${shown} must be > ${f.above} but received ${raw}`);
      if (f.max !== undefined && v > f.max) throw new UsageError(`option ${shown} must be <= ${f.max} but received ${raw}`);
      return v;
    }
  }
}

// ---- help text ----

function flagLabel(key: string, f: FlagSpec): string {
  const long = `--${kebab(key)}`;
  const head = f.short ? `-${f.short}, ${long}` : `    ${long}`;
  if (f.type === 'boolean') return head;
  if (f.type === 'choice') return `${head} <${f.choices.join('|')}>`;
  return `${head} <${f.valueName ?? (f.type === 'string' ? 'value' : f.type === 'integer' ? 'n' : 'x')}>`;
}

function flagNote(f: FlagSpec): string {
  if (f.type === 'boolean') return '';
  if (f.required) return ' (required)';
  if (f.default !== undefined) return ` (default: ${f.default})`;
  return '';
}

function table(rows: [string, string][]): string {
  const w = Math.min(34, Math.max(...rows.map(([a]) => a.length)) + 2);
  return rows.map(([a, b]) => `  ${a.length >= w ? `${a}\n  ${' '.repeat(w)}` : a.padEnd(w)}${b}`).join('\n');
}

/** --help of a leaf command; `path` is the words that led to it, e.g. ['sublinear', 'data', 'inspect']. */
export function commandHelp(cmd: Command, path: readonly string[]): string {
  const s = cmd.spec;
  const pos = (s.positionals ?? []).map((p) => (p.required === false ? `[${p.name}]` : `<${p.name}>`)).join(' ');
  const rest = s.rest ? ` -- <${s.rest.name}...>` : '';
  const lines = [`Usage: ${path.join(' ')} [options]${pos ? ` ${pos}` : ''}${rest}`, '', s.summary];
  if (s.description) lines.push('', s.description);
  if (s.positionals?.length || s.rest) {
    const rows: [string, string][] = (s.positionals ?? []).map((p) => [`<${p.name}>`, p.description]);
    if (s.rest) rows.push([`<${s.rest.name}...>`, s.rest.description]);
    lines.push('', 'Arguments:', table(rows));
  }
  const rows: [string, string][] = Object.entries(s.flags).map(([k, f]) => [flagLabel(k, f), f.description + flagNote(f)]);
  rows.push(['-h, --help', 'show this help']);
  lines.push('', 'Options:', table(rows));
  if (s.examples?.length) lines.push('', 'Examples:', ...s.examples.map((e) => `  ${path[0]} ${e}`));
  return lines.join('\n') + '\n';
}

/** --help of a group. */
export function groupHelp(group: CommandGroup, path: readonly string[]): string {
  const lines = [`Usage: ${path.join(' ')} <command> [options]`, '', group.summary];
  if (group.description) lines.push('', group.description);
  lines.push('', 'Commands:', table(group.commands.map((c) => [c.name, c.summary])));
  lines.push('', `Run '${path.join(' ')} <command> --help' for the options of a command.`);
  return lines.join('\n') + '\n';
}
