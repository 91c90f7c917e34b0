// Dispatches `sublinear <command> ...` over the command table below.
// Exit codes: 0 success, 1 runtime error (`sublinear: <message>` on stderr), 2 usage error (the message
// and a pointer to --help on stderr). `train` exits 0 when a checkpoint could not be written but the
// trained model was saved (--save, or the final checkpoint): the failures are warned on stderr and
// counted in the JSON summary (checkpointFailures); 1 when the final state was saved nowhere.
import { readFileSync } from 'node:fs';
import { once } from 'node:events';
import { fsErrorReason, isKnownFsError } from '../util/fs-errors.js';
import { join } from 'node:path';
import { packageRoot } from '../util/package-root.js';
import {
  commandHelp, defineGroup, groupHelp, HELP, parseCommandArgs, suggest, UsageError,
  type CliIO, type CommandGroup, type CommandNode,
} from './args.js';
import { dataCommands } from './data.js';
import { demoCmd, evalCmd, predictCmd, trainCmd } from './engine-commands.js';
import { benchCmd } from './bench.js';
import { infoCmd } from './info.js';
import { launchCmd } from './launch.js';
import { planCmd } from './plan.js';
import { serveCmd } from './serve.js';
import { native } from '../native/addon.js';

/** Top-level commands and groups, in --help order. Registering a command is one line here. */
export const COMMANDS: CommandNode[] = [
  trainCmd,
  launchCmd,
  evalCmd,
  predictCmd,
  infoCmd,
  planCmd,
  serveCmd,
  demoCmd,
  benchCmd,
  dataCommands,
];

/**
 * Commands that run the native addon: it is loaded before they start, so a missing or broken build is
 * reported at once instead of after generating or reading data (--help still works without it).
 */
const NEEDS_ADDON: ReadonlySet<CommandNode> = new Set([trainCmd, evalCmd, predictCmd, serveCmd, demoCmd, planCmd]);

const ROOT: CommandGroup = defineGroup(
  'sublinear',
  'SLIDE-style sparse deep-learning training on the CPU: LSH-sampled layers, sparse Adam, HOGWILD workers.',
  COMMANDS,
);

/** stdout/stderr of this process. */
export const processIO: CliIO = {
  out: (s) => void process.stdout.write(s),
  err: (s) => void process.stderr.write(s),
  drain: () => (process.stdout.writableNeedDrain ? once(process.stdout, 'drain').then(() => {}) : Promise.resolve()),
};

/** Runs the command line `argv` (without `node` and the script) and returns the exit code. */
export async function main(argv: readonly string[], io: CliIO = processIO): Promise<number> {
  const path = ['sublinear'];
  try {
    return await dispatch(ROOT, argv, path, io);
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`${path.join(' ')}: ${err.message}\nRun '${path.join(' ')} --help' for usage.\n`);
      return 2;
    }
    io.err(`sublinear: ${describeError(err)}\n`);
    return 1;
  }
}

/** Walks groups by their words, then parses and runs the leaf; `path` grows in place for messages. */
async function dispatch(node: CommandNode, argv: readonly string[], path: string[], io: CliIO): Promise<number> {
  if (node.kind === 'command') {
    const parsed = parseCommandArgs(node.spec, argv);
    if (parsed === HELP) {
      io.out(commandHelp(node, path));
      return 0;
    }
    if (NEEDS_ADDON.has(node)) native();
    return node.spec.run(parsed as never, io);
  }
  const [word, ...rest] = argv;
  if (word === undefined) {
    io.err(groupHelp(node, path));
    return 2;
  }
  if (word === '-h' || word === '--help' || word === 'help') {
    io.out(groupHelp(node, path));
    return 0;
  }
  if (node === ROOT && (word === '--version' || word === '-V')) {
    io.out(`${version()}\n`);
    return 0;
  }
  const child = node.commands.find((c) => c.name === word);
  if (!child) {
    const what = word.startsWith('-') ? 'option' : 'command';
    const names = node.commands.map((c) => c.name);
    const prefixed = names.filter((n) => word.length >= 2 && n.startsWith(word));
    const hint = prefixed.length === 1 ? ` (did you mean ${prefixed[0]}?)` : suggest(word, names, '');
    throw new UsageError(`unknown ${what} '${word}'${hint}`);
  }
  path.push(child.name);
  return dispatch(child, rest, path, io);
}

function version(): string {
  return (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version;
}

/** The message of an error, with Node's file-system errors made readable. */
function describeError(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  if (e && typeof e === 'object' && typeof e.path === 'string' && isKnownFsError(e)) return `${e.path}: ${fsErrorReason(e)}`;
  // Library errors name their origin ('sublinear: ...') for callers of the API; this CLI adds the prefix itself.
  return (err instanceof Error ? err.message : String(err)).replace(/^sublinear: /, '');
}
