// The README and docs/ as a newcomer reads them: the README fits in a few screens (at most 250 lines), each
// docs page holds one subject (at most 600 lines) and starts with a short example, every relative link
// (and its #anchor) resolves, and every block marked runnable (```sh runnable, ```js runnable) runs:
// on tiny data generated here (train.txt, test.txt: XC; docs.txt, docs-test.txt: raw text), each page's
// blocks in order in a fresh folder, `sublinear` being the compiled CLI and 'sublinear' the compiled package.
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { synthesize, writeXC } from '../src/datasets/index.js';
import { assertBuilt, CLI, ROOT } from './cli/built.js';
import { topicLines } from './text/synthetic-text.js';

const README_LINES = 250;
const PAGE_LINES = 600;

const pages = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)];
const text = (page: string) => readFileSync(join(ROOT, page), 'utf8');

/** The fenced code blocks of a page: info string and body. */
function blocks(md: string): { info: string; body: string }[] {
  return [...md.matchAll(/^```([^\n]*)\n([\s\S]*?)^```$/gm)].map((m) => ({ info: m[1]!.trim(), body: m[2]! }));
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\- _]/gu, '').replace(/ /g, '-');
}

/** The anchors of a page's headings (outside code blocks). */
function anchors(md: string): Set<string> {
  const prose = md.replace(/^```[\s\S]*?^```$/gm, '');
  return new Set([...prose.matchAll(/^#+ (.*)$/gm)].map((m) => slug(m[1]!)));
}

/** Relative links of a page (under `root`) that do not resolve: a missing file, or an anchor no heading of its target has. */
function brokenLinks(page: string, root = ROOT): string[] {
  const md = readFileSync(join(root, page), 'utf8').replace(/^```[\s\S]*?^```$/gm, '');
  const broken: string[] = [];
  for (const m of md.matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = m[1]!;
    if (/^[a-z]+:/.test(target)) continue;
    const [file, anchor] = target.split('#') as [string, string | undefined];
    const path = file ? resolve(dirname(join(root, page)), file) : join(root, page);
    if (!existsSync(path)) broken.push(`${page}: ${target} (no ${relative(root, path)})`);
    else if (anchor && path.endsWith('.md') && !anchors(readFileSync(path, 'utf8')).has(anchor)) broken.push(`${page}: ${target} (no such heading)`);
  }
  return broken;
}

const work = mkdtempSync(join(tmpdir(), 'sublinear-docs-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('README and docs/', () => {
  it(`the README is at most ${README_LINES} lines, each docs page at most ${PAGE_LINES}`, () => {
    const lines = (p: string) => text(p).split('\n').length - 1;
    expect(lines('README.md')).toBeLessThanOrEqual(README_LINES);
    expect(pages.filter((p) => p !== 'README.md' && lines(p) > PAGE_LINES)).toEqual([]);
  });

  it('each docs page starts with its title and a short example', () => {
    const bad = pages.filter((p) => p !== 'README.md' && !/^# [^\n]+\n\n```/.test(text(p)));
    expect(bad).toEqual([]);
  });

  it('the README starts with the two commands that set everything up', () => {
    expect(text('README.md')).toContain('npm install && npm start');
    expect(text('README.md')).toContain('npm test ');
  });

  it('every relative link resolves, anchors included', () => {
    expect(pages.flatMap((p) => brokenLinks(p))).toEqual([]);
  });

  it('the link check sees a missing file and a missing heading', () => {
    const root = join(work, 'links');
    mkdirSync(join(root, 'docs'), { recursive: true });
    writeFileSync(join(root, 'docs', 'cli.md'), '# Command line\n\n## JSON results\n');
    writeFileSync(join(root, 'docs', 'probe.md'), '# Probe\n\n[a](cli.md#json-results) [b](nowhere.md) [c](cli.md#no-such-heading)\n');
    expect(brokenLinks('docs/probe.md', root)).toEqual(['docs/probe.md: nowhere.md (no docs/nowhere.md)', 'docs/probe.md: cli.md#no-such-heading (no such heading)']);
  });
});

/** A folder with the tiny data the runnable blocks read, and a `sublinear` on PATH. */
async function folder(name: string): Promise<{ dir: string; env: NodeJS.ProcessEnv }> {
  const dir = join(work, name.replace(/\W/g, '-'));
  const bin = join(work, 'bin');
  mkdirSync(dir, { recursive: true });
  if (!existsSync(join(bin, 'sublinear'))) {
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, 'sublinear'), `#!/bin/sh\nexec "${process.execPath}" "${CLI}" "$@"\n`);
    chmodSync(join(bin, 'sublinear'), 0o755);
  }
  await writeXC(join(dir, 'train.txt'), synthesize({ shape: 'tiny', points: 2500, seed: 21 }));
  await writeXC(join(dir, 'test.txt'), synthesize({ shape: 'tiny', points: 300, seed: 22 }));
  writeFileSync(join(dir, 'docs.txt'), topicLines(600, 0, 20, 31).join('\n') + '\n');
  writeFileSync(join(dir, 'docs-test.txt'), topicLines(150, 0, 20, 32).join('\n') + '\n');
  return { dir, env: { ...process.env, PATH: `${bin}:${process.env.PATH}` } };
}

const runnable = pages.map((page) => ({ page, blocks: blocks(text(page)).filter((b) => /^(sh|js) runnable$/.test(b.info)) })).filter((p) => p.blocks.length > 0);

describe('the runnable examples', () => {
  it('are marked on the pages that show commands and code', () => {
    expect(runnable.map((p) => p.page)).toEqual(expect.arrayContaining(['README.md', 'docs/cli.md', 'docs/library.md', 'docs/text.md']));
  });

  it.each(runnable)('$page: every runnable block runs on tiny data', async ({ page, blocks: list }) => {
    assertBuilt(['src/cli', 'src/job']);
    const { dir, env } = await folder(page);
    const index = pathToFileURL(join(ROOT, 'dist/src/index.js')).href;
    for (const [i, b] of list.entries()) {
      let r;
      if (b.info.startsWith('sh')) {
        r = spawnSync('bash', ['-c', `set -eo pipefail\n${b.body}`], { cwd: dir, env, encoding: 'utf8', timeout: 240_000 });
      } else {
        const file = join(dir, `block-${i}.mjs`);
        writeFileSync(file, b.body.replaceAll("from 'sublinear'", `from '${index}'`));
        r = spawnSync(process.execPath, [file], { cwd: dir, env, encoding: 'utf8', timeout: 240_000 });
      }
      expect(r.status, `${page}, block ${i + 1}:\n${b.body}\n${r.stderr}`).toBe(0);
    }
  }, 600_000);
});
