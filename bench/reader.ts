// XC reader throughput: MB of text parsed per second into CSR, on one core (the parse runs on the main
// thread; only the chunked file reads go to libuv's pool).
//
//   node dist/bench/reader.js [--json] [--file f] [--points n] [--runs r] [--keep]
//
// Without --file, writes a synthetic amazon-670k-shaped file (default 100,000 points, about 107 MB: the
// real file's row shape, ~75 tf-idf values of 4 significant digits and ~5 labels per line) to a temporary
// folder, reads it --runs times (default 3) and deletes it (unless --keep). The file is read right after
// being written, so it comes from the page cache: this measures parsing, not the disk.
// Last stdout line: {"mbPerSec": median, "bestMbPerSec", "bytes", "seconds": median, ...}.
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateSynthetic } from '../src/datasets/synth.js';
import { readXC } from '../src/datasets/xc-reader.js';
import { peakRssMB } from '../src/util/peak-rss.js';
import { defineCommand } from '../src/cli/args.js';
import { benchMain } from './cli.js';

interface Args {
  json: boolean;
  file?: string;
  points: number;
  runs: number;
  keep: boolean;
}

export const readerCmd = defineCommand({
  name: 'bench:reader',
  summary: 'XC reader throughput (MB/s, median of the runs) on a file, by default a generated Amazon-670K-shaped one.',
  flags: {
    file: { type: 'string', valueName: 'file', description: 'an XC file to read (default: generate a synthetic one in a temporary folder)' },
    points: { type: 'integer', min: 1, default: 100_000, valueName: 'n', description: 'points of the generated file' },
    runs: { type: 'integer', min: 1, default: 3, valueName: 'n', description: 'timed reads' },
    keep: { type: 'boolean', description: 'keep the generated file' },
    json: { type: 'boolean', description: 'print only the JSON line' },
  },
  run: async (o) => {
    await measure(o);
    return 0;
  },
});

async function measure(a: Args): Promise<void> {
  const log = (s: string) => {
    if (!a.json) process.stdout.write(s + '\n');
  };
  let dir: string | undefined;
  let file = a.file;
  if (!file) {
    dir = await mkdtemp(join(tmpdir(), 'sublinear-bench-reader-'));
    const t0 = performance.now();
    const r = await generateSynthetic({ shape: 'amazon-670k', train: a.points, test: 0, seed: 1, outDir: dir, fsync: false });
    file = r.train;
    log(`generated ${file}: ${(r.bytes / 1e6).toFixed(1)} MB in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  }
  try {
    const bytes = (await stat(file)).size;
    const times: number[] = [];
    let points = 0, nnz = 0, csrBytes = 0;
    for (let r = 0; r < a.runs; r++) {
      const t0 = performance.now();
      const d = await readXC(file);
      const s = (performance.now() - t0) / 1000;
      times.push(s);
      points = d.points;
      nnz = d.offsets[d.points]!;
      csrBytes = (d.offsets.length + d.labelOffsets.length + d.indices.length + d.values.length + d.labelIndices.length) * 4;
      log(`run ${r + 1}: ${s.toFixed(3)} s, ${(bytes / 1e6 / s).toFixed(1)} MB/s`);
    }
    const sorted = [...times].sort((x, y) => x - y);
    const median = sorted[Math.floor((sorted.length - 1) / 2)]!;
    const result = {
      mbPerSec: bytes / 1e6 / median,
      bestMbPerSec: bytes / 1e6 / sorted[0]!,
      bytes,
      seconds: median,
      runs: times,
      points,
      nnz,
      csrBytes,
      peakRssMB: peakRssMB(),
      file: a.file ?? 'synthetic amazon-670k',
    };
    log(`${(bytes / 1e6).toFixed(1)} MB, ${points} points, ${nnz} nonzeros: median ${result.mbPerSec.toFixed(1)} MB/s, best ${result.bestMbPerSec.toFixed(1)} MB/s`);
    process.stdout.write(JSON.stringify(result) + '\n');
  } finally {
    if (dir && !a.keep) await rm(dir, { recursive: true, force: true });
    else if (dir) log(`kept ${file}`);
  }
}

await benchMain(import.meta.url, readerCmd, 'npm run bench:reader --');
