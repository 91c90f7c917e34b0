// Bounded echoes of input in error messages. An error that quotes what it refuses must stay one readable
// line however long the input is: a 100-million-digit id in a data file, or a megabyte string in a config,
// is shown by its first characters and a count of the rest, never printed whole (which once wrote
// 100 MB to stderr).

/** Characters of echoed input kept in a message. */
export const ECHO_LIMIT = 80;

/** `text` cut to `max` characters, with `…(N more characters)` when cut. */
export function boundText(text: string, max = ECHO_LIMIT): string {
  return text.length > max ? `${text.slice(0, max)}…(${text.length - max} more characters)` : text;
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
