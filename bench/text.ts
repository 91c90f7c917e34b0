// Text featurisation throughput: MB of raw text per second turned into tf-idf rows (read + fit of the
// vectorizer + transform, as `train --input-format text` and `data featurize` do), on one core.
//
//   node dist/bench/text.js [--file f] [--runs r] [--bigrams] [--min-df n] [--max-vocabulary n] [--json]
//
// Without --file, reads debian-tags/raw-train.txt from the data folder (--data-dir, $SUBLINEAR_DATASETS, or
// ../shared/datasets beside a clone). The file is read --runs times (default 3); the first run warms the page
// cache, so the median measures parsing and featurisation, not the disk.
// Last stdout line: {"mbPerSec": median, "readSeconds", "fitSeconds", "transformSeconds", "bytes", ...}.
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { readText } from '../src/datasets/text-reader.js';
import { TextVectorizer } from '../src/text/vectorizer.js';
import { peakRssMB } from '../src/util/peak-rss.js';
import { defineCommand } from '../src/cli/args.js';
import { benchMain } from './cli.js';
import { DATA_DIR_HELP, dataDir } from './data-dir.js';

export const textCmd = defineCommand({
  name: 'bench:text',
  summary: 'Raw-text featurisation throughput (MB/s, median of the runs): read, fit the vectorizer, transform.',
  flags: {
    file: { type: 'string', valueName: 'file', description: 'a raw-text file (label,label<TAB>text per line; default: debian-tags/raw-train.txt of the data folder)' },
    dataDir: { type: 'string', valueName: 'dir', description: DATA_DIR_HELP },
    runs: { type: 'integer', min: 1, default: 3, valueName: 'n', description: 'timed runs' },
    bigrams: { type: 'boolean', description: 'also use word bigrams' },
    minDf: { type: 'integer', min: 1, default: 2, valueName: 'n', description: 'minimum document frequency' },
    maxVocabulary: { type: 'integer', min: 1, default: 200000, valueName: 'n', description: 'hash above this many kept words' },
    json: { type: 'boolean', description: 'print only the JSON line' },
  },
  run: async (o) => {
    const log = (s: string) => {
      if (!o.json) process.stdout.write(s + '\n');
    };
    let file = o.file;
    if (!file) {
      const d = dataDir(o.dataDir);
      if (!d.dir) throw new Error('no data folder: give --file, --data-dir or $SUBLINEAR_DATASETS');
      file = join(d.dir, 'debian-tags', 'raw-train.txt');
    }
    const bytes = (await stat(file)).size;
    const runs: { read: number; fit: number; transform: number; total: number }[] = [];
    let points = 0, features = 0, nnz = 0, mode = '';
    for (let r = 0; r < o.runs; r++) {
      const t0 = performance.now();
      const data = await readText(file);
      const t1 = performance.now();
      const v = TextVectorizer.fit(data.texts, { bigrams: o.bigrams, minDf: o.minDf, maxVocabulary: o.maxVocabulary });
      const t2 = performance.now();
      const x = v.transform(data.texts);
      const t3 = performance.now();
      runs.push({ read: (t1 - t0) / 1000, fit: (t2 - t1) / 1000, transform: (t3 - t2) / 1000, total: (t3 - t0) / 1000 });
      points = x.points;
      features = v.features;
      nnz = x.offsets[x.points]!;
      mode = v.mode;
      log(`run ${r + 1}: read ${runs[r]!.read.toFixed(2)} s, fit ${runs[r]!.fit.toFixed(2)} s, transform ${runs[r]!.transform.toFixed(2)} s: ${(bytes / 1e6 / runs[r]!.total).toFixed(1)} MB/s`);
    }
    const median = [...runs].sort((a, b) => a.total - b.total)[Math.floor((runs.length - 1) / 2)]!;
    const result = {
      mbPerSec: bytes / 1e6 / median.total, readSeconds: median.read, fitSeconds: median.fit, transformSeconds: median.transform,
      seconds: median.total, bytes, points, features, mode, nnz, bigrams: o.bigrams, peakRssMB: peakRssMB(), file,
    };
    log(`${(bytes / 1e6).toFixed(1)} MB, ${points} points, ${features} features (${mode}), ${nnz} nonzeros: median ${result.mbPerSec.toFixed(1)} MB/s`);
    process.stdout.write(JSON.stringify(result) + '\n');
    return 0;
  },
});

await benchMain(import.meta.url, textCmd, 'npm run bench:text --');
