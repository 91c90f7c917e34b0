// The CLI loads the native addon before a command that needs it does any work, and reports a failure once,
// with one 'sublinear: ' prefix and advice that works.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { assertBuilt, CLI } from './built.js';

const tmp = mkdtempSync(join(tmpdir(), 'sublinear-addon-load-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('a native addon that cannot be loaded', () => {
  assertBuilt(['src', 'src/cli']);
  const env = { ...process.env, SUBLINEAR_ADDON: join(tmp, 'missing.node'), TMPDIR: tmp };

  it('fails the demo at once: exit 1, one prefix, nothing generated', () => {
    const r = spawnSync(process.execPath, [CLI, 'demo', '--json'], { env, encoding: 'utf8', timeout: 30_000 });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^sublinear: could not load the native addon named by SUBLINEAR_ADDON\.\n/);
    expect(r.stderr).not.toContain('sublinear: sublinear:');
    expect(r.stdout).toBe('');
    expect(readdirSync(tmp)).toEqual([]); // the demo's data folder was never created
  });

  it('fails train before reading its data (the missing data file is not what is reported)', () => {
    const r = spawnSync(process.execPath, [CLI, 'train', '--train', join(tmp, 'no-such.txt')], { env, encoding: 'utf8', timeout: 30_000 });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('could not load the native addon');
    expect(r.stderr).not.toContain('no-such.txt');
  });

  it('still prints --help', () => {
    const r = spawnSync(process.execPath, [CLI, 'demo', '--help'], { env, encoding: 'utf8', timeout: 30_000 });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^Usage: sublinear demo/);
  });
});
