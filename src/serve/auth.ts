// Keeping strangers out (docs/serving.md "Security"): a bearer token on every route but liveness (and the
// static page, which holds no data and asks for the token), and a refusal to listen beyond loopback
// without one unless told to.
import { createHash, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import { readFile } from 'node:fs/promises';

/** Whether `host` names this machine only: 127.0.0.0/8, ::1 (and its IPv4-mapped form) or localhost. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost' || h === '::1' || h === '0:0:0:0:0:0:0:1') return true;
  const v4 = h.startsWith('::ffff:') ? h.slice(7) : h;
  return isIP(v4) === 4 && v4.startsWith('127.');
}

/**
 * The refusal to listen on `host` beyond loopback without a token (null: allowed). `insecure` lets it
 * listen anyway (a private network, or a proxy in front that authenticates).
 */
export function exposureProblem(host: string, token: string | undefined, insecure: boolean): string | null {
  if (token !== undefined || insecure || isLoopback(host)) return null;
  return `refusing to listen on ${host} without a token: anyone who can reach this machine could use the model` +
    ' (and, with learning on, change it). Give a token (serve --token FILE), or listen on 127.0.0.1, or pass --insecure to listen anyway';
}

/** Reads a token file: its content without surrounding whitespace, at least 16 characters, printable ASCII. */
export async function readTokenFile(path: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    throw new Error(`cannot read the token file ${path}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (e as Error).message}`);
  }
  return checkToken(text.trim(), path);
}

/** A token as the server takes it (ServeOptions.token): at least 16 printable ASCII characters, no spaces. */
export function checkToken(token: string, where = 'the token'): string {
  if (token.length < 16) throw new Error(`${where}: the token must be at least 16 characters long (it has ${token.length})`);
  if (!/^[\x21-\x7e]+$/.test(token)) throw new Error(`${where}: the token must be printable ASCII without spaces`);
  return token;
}

/** Compares an Authorization header with the token in constant time (digests of equal length). */
export function authorized(header: string | undefined, token: string): boolean {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  if (!m) return false;
  const a = createHash('sha256').update(m[1]!).digest(), b = createHash('sha256').update(token).digest();
  return timingSafeEqual(a, b);
}
