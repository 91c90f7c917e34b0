// The page at `/` as a person uses it, in headless Chromium (Debian's `chromium`, driven by playwright-core):
// paste text, ask for labels, see them with probabilities and the tokens that explain them, and the live
// metrics; then the same behind a token. A screenshot goes to test-results/serve-page.png (its path is
// printed). Skipped, saying why, where /usr/bin/chromium is missing (.ci/run installs it when it can).
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Network } from '../../src/network/network.js';
import { fit } from '../../src/train/fit-network.js';
import { serve, type PredictionServer } from '../../src/serve/server.js';
import { TextVectorizer } from '../../src/text/vectorizer.js';
import { LabelNames, labelledDataset } from '../../src/text/labels.js';
import { parseTextLine } from '../../src/datasets/text-reader.js';
import { topicLines } from '../text/synthetic-text.js';

const CHROMIUM = '/usr/bin/chromium';
const missing = existsSync(CHROMIUM) ? null : `${CHROMIUM} is missing (apt-get install chromium; .ci/run installs it as root)`;
if (missing) console.warn(`skipping the page test: ${missing}`);
const ROOT = join(import.meta.dirname, '../..');

describe.skipIf(missing !== null)('the page at / in headless Chromium', () => {
  let net: Network;
  let browser: import('playwright-core').Browser;
  beforeAll(async () => {
    const lines = topicLines(1200, 0, 8, 9).map((l, i) => parseTextLine(l, 'mem', i + 1));
    const v = TextVectorizer.fit(lines.map((l) => l.text));
    const names = new LabelNames();
    const d = labelledDataset({ points: lines.length, texts: lines.map((l) => l.text), labels: lines.map((l) => l.labels), lines: new Uint32Array(lines.length) }, v, names, true).dataset;
    net = new Network({ inputDim: v.features, seed: 6, layers: [{ size: 32 }, { size: names.size }] });
    net.textVectorizer = v;
    net.labelNames = names.names;
    await fit(net, d, { validation: { maxEpochs: 6, minHoldout: 50, refitMaxPoints: 0 }, workers: 0 });
    const { chromium } = await import('playwright-core');
    // The flags this machine's Chromium needs: no sandbox as root, no GPU, and no background connections
    // (the network beyond loopback is closed).
    browser = await chromium.launch({
      executablePath: CHROMIUM, headless: true,
      // (playwright starts it with a new empty profile of its own.)
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
  });

  it('shows the labels of pasted text with probabilities and explaining tokens, and the live metrics', async () => {
    const server: PredictionServer = await serve(net, { port: 0, workers: 1, modelName: 'topics' });
    try {
      const page = await browser.newPage({ viewport: { width: 1200, height: 760 } });
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(e.message));
      await page.goto(`${server.url}/`);
      await page.waitForFunction(() => document.getElementById('model')!.textContent!.includes('labels'));
      expect(await page.textContent('#model')).toContain('topics: 8 labels');
      expect(await page.textContent('#model')).toContain('calibrated probabilities');
      await page.fill('#input', 'w5a the w5b package w5c tool');
      await page.fill('#k', '3');
      await page.click('#predict');
      await page.waitForSelector('#results tbody tr.label-row');
      const rows = await page.$$eval('#results tbody tr.label-row', (trs) => trs.map((tr) => Array.from(tr.querySelectorAll('td'), (td) => td.textContent!.trim())));
      const want = await net.predict(net.textVectorizer!.transform(['w5a the w5b package w5c tool']), { k: 3, workers: 0 });
      expect(rows.map((r) => r[0])).toEqual(Array.from(want.labels, (l) => net.labelNames![l]));
      expect(rows[0]![1]).toBe(`${(100 * want.probabilities![0]!).toFixed(1)}%`);
      // The explanation: tokens of the text, the strongest first.
      expect(rows[0]![3]).toMatch(/^w5[abc] \+/);
      // Metrics: the panel reads /metrics (the /explain request was counted).
      await page.waitForFunction(() => Number(document.querySelector('[data-metric="requests"]')?.textContent ?? 0) >= 1, undefined, { timeout: 10_000 });
      expect(await page.textContent('[data-metric="ready"]')).toBe('yes');
      expect(await page.textContent('[data-metric="labels"]')).toBe('8');
      await mkdir(join(ROOT, 'test-results'), { recursive: true });
      const shot = join(ROOT, 'test-results', 'serve-page.png');
      await page.screenshot({ path: shot, fullPage: true });
      console.log(`page screenshot: ${shot}`);
      expect(errors).toEqual([]);
      await page.close();
    } finally {
      await server.close();
    }
  }, 60_000);

  it('behind a token: the page asks for it, then works', async () => {
    const token = 'page-test-token-0123456789';
    const server = await serve(net, { port: 0, workers: 0, token });
    try {
      const page = await browser.newPage();
      await page.goto(`${server.url}/`);
      await page.waitForSelector('#token-box', { state: 'visible' });
      await page.fill('#token', token);
      await page.click('#token-save');
      await page.waitForFunction(() => document.getElementById('model')!.textContent!.includes('labels'));
      await page.fill('#input', 'w2a w2b data');
      await page.click('#predict');
      await page.waitForSelector('#results tbody tr.label-row');
      expect(await page.$$eval('#results tbody tr.label-row', (trs) => trs.length)).toBe(5);
      await page.close();
    } finally {
      await server.close();
    }
  }, 60_000);
});
