// The entry point shared by the benchmark scripts: their arguments are declared with src/cli/args.ts's
// defineCommand, like the CLI's commands, so every bench has --help (printed from the declaration; exit 0
// without running anything), rejects unknown or malformed flags with exit code 2, and reports runtime
// errors as `<name>: <message>` with exit code 1.
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { commandHelp, HELP, parseCommandArgs, UsageError, type CliIO, type Command } from '../src/cli/args.js';

/** stdout/stderr of this process. */
export const benchIO: CliIO = { out: (s) => void process.stdout.write(s), err: (s) => void process.stderr.write(s) };

/**
 * Parses `argv` against `cmd` and runs it; returns the exit code. `usage` is how a user starts the script,
 * shown in --help and error messages, e.g. 'npm run bench:engine --' or 'node dist/bench/dispatch.js'.
 */
export async function runBench(cmd: Command, usage: string, argv: readonly string[], io: CliIO = benchIO): Promise<number> {
  try {
    const parsed = parseCommandArgs(cmd.spec, argv);
    if (parsed === HELP) {
      io.out(commandHelp(cmd, [usage]));
      return 0;
    }
    return await cmd.spec.run(parsed as never, io);
  } catch (e) {
    if (e instanceof UsageError) {
      io.err(`${cmd.name}: ${e.message}\nRun '${usage} --help' for usage.\n`);
      return 2;
    }
    io.err(`${cmd.name}: ${e instanceof Error ? e.message : String(e)}\n`);
    return 1;
  }
}

/** Whether the module with this import.meta.url is the script node was started with (not imported by a test). */
export function isEntryPoint(metaUrl: string): boolean {
  const script = process.argv[1];
  if (!script) return false;
  try {
    return metaUrl === pathToFileURL(realpathSync(script)).href; // ESM module URLs are real paths
  } catch {
    return false;
  }
}

/**
 * `runBench` on this process's arguments when `metaUrl` is the entry script; sets the exit code
 * (so pending output is flushed and worker pools close normally).
 */
export async function benchMain(metaUrl: string, cmd: Command, usage: string): Promise<void> {
  if (!isEntryPoint(metaUrl)) return;
  process.exitCode = await runBench(cmd, usage, process.argv.slice(2));
}
