// The one error type of the dataset readers: every problem found in a data file is reported as
// `<file>:<line>: <problem>` so that an editor or `grep -n` takes the user straight to it.

import { escapeControl } from '../util/bounded-text.js';

/**
 * A problem in the contents of a data file (not an I/O error: those keep Node's own errors): `file`, `line`
 * and `problem`, and the message `file:line: problem`.
 *
 * @example
 * ```ts
 * try { await readXC('train.txt'); }
 * catch (e) { if (e instanceof DataFormatError) console.error(`${e.file}:${e.line}: ${e.problem}`); else throw e; }
 * ```
 */
export class DataFormatError extends Error {
  /** The file as the caller named it. */
  readonly file: string;
  /** 1-based line number of the problem (0 when the problem is about the file as a whole). */
  readonly line: number;
  /** The problem without the `file:line: ` prefix. */
  readonly problem: string;

  constructor(file: string, line: number, problem: string) {
    super(line > 0 ? `${file}:${line}: ${problem}` : `${file}: ${problem}`);
    this.name = 'DataFormatError';
    this.file = file;
    this.line = line;
    this.problem = problem;
  }
}

/** Quotes a token for an error message, shortening very long ones so a message stays one readable line. */
export function quoteToken(token: string): string {
  const t = token.length > 40 ? `${token.slice(0, 37)}...` : token;
  return `'${escapeControl(t)}'`;
}
