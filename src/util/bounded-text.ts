// Bounded echoes of input in error messages. An error that quotes what it refuses must stay one readable
// line however long the input is: a 100-million-digit id in a data file, or a megabyte string in a config,
// is shown by its first characters and a count of the rest, never printed whole (which once wrote
// 100 MB to stderr).

/** Characters of echoed input kept in a message. */
export const ECHO_LIMIT = 80;

/** `text` cut to `max` characters, with `…(N more characters)` when cut, its control characters escaped (escapeControl). */
export function boundText(text: string, max = ECHO_LIMIT): string {
  return text.length > max ? `${escapeControl(text.slice(0, max))}…(${text.length - max} more characters)` : escapeControl(text);
}

// C0 and C1 controls, DEL, and the Unicode line separators and bidirectional overrides that can rewrite
// how a terminal shows the rest of the line.
const CONTROL = /[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/**
 * `text` with every character that would act on a terminal instead of showing (escape sequences, carriage
 * returns, bells, NULs of a binary file; bidirectional overrides) written as `\xNN` or `\uNNNN`.
 */
export function escapeControl(text: string): string {
  return text.replace(CONTROL, (c) => {
    const n = c.charCodeAt(0);
    return n <= 0xff ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u${n.toString(16).padStart(4, '0')}`;
  });
}

/** JSON.stringify of a value for a message (String() for what JSON cannot show), cut like boundText. */
export function boundJson(value: unknown, max = ECHO_LIMIT): string {
  let s: string | undefined;
  try {
    s = JSON.stringify(value);
  } catch {
    s = undefined;
  }
  return boundText(s ?? String(value), max);
}
