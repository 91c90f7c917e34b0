// Where the benchmarks find the real datasets (Bibtex, Delicious) of the Extreme Classification Repository.
// They are not shipped with sublinear: a user downloads them and points the benchmarks at the folder that
// holds bibtex/ and delicious/, with --data-dir or the SUBLINEAR_DATASETS environment variable. A missing
// dataset gets a message that says where to download it and where to put it.
import { existsSync } from 'node:fs';
import { join, resolve, sep } from 'node:path';
import { packageRoot } from '../src/util/package-root.js';

/** Environment variable naming the data folder when --data-dir is not given. Default: unset. */
export const DATASETS_ENV = 'SUBLINEAR_DATASETS';
export const XC_REPOSITORY_URL = 'http://manikvarma.org/downloads/XC/XMLRepository.html';

/** The files of each dataset, inside `<data dir>/<name>/`, as the repository distributes them. */
export const DATASET_FILES = {
  bibtex: { title: 'Bibtex', files: ['Bibtex_data.txt', 'bibtex_trSplit.txt', 'bibtex_tstSplit.txt'], source: 'xc' },
  delicious: { title: 'Delicious', files: ['Delicious_train.txt', 'Delicious_test.txt'], source: 'xc' },
  /** Real text sets built from Debian's package archive (package descriptions to dependencies / debtags). */
  'debian-deps': { title: 'debian-deps', files: ['train.txt', 'test.txt'], source: 'debian' },
  'debian-tags': { title: 'debian-tags', files: ['train.txt', 'test.txt'], source: 'debian' },
} as const;
export type RealDataset = keyof typeof DATASET_FILES;

/** --help text of the benchmarks' --data-dir flag. */
export const DATA_DIR_HELP =
  `folder holding bibtex/ and delicious/ from the Extreme Classification Repository (and debian-deps/, debian-tags/ for bench:accuracy) (default: $${DATASETS_ENV}; ` +
  'in a clone of the repository also ../shared/datasets beside it)';

/**
 * The data folder: `flag`, else $SUBLINEAR_DATASETS, else (in a clone of the repository, not in an
 * installed package) ../shared/datasets beside it. `from` says which, for messages; `dir` is undefined
 * when none applies.
 */
export function dataDir(flag?: string): { dir: string | undefined; from: string } {
  if (flag) return { dir: resolve(flag), from: '--data-dir' };
  const env = process.env[DATASETS_ENV];
  if (env) return { dir: resolve(env), from: `$${DATASETS_ENV}` };
  const root = packageRoot();
  if (root.split(sep).includes('node_modules')) return { dir: undefined, from: 'none' };
  return { dir: join(root, '..', 'shared', 'datasets'), from: 'the default beside the repository' };
}

/** The dataset's files when all are present; else the missing ones and a message saying how to get them. */
export function findDataset(name: RealDataset, flag?: string): { files: string[] } | { missing: string[]; message: string } {
  const { title, files, source } = DATASET_FILES[name];
  const { dir, from } = dataDir(flag);
  const how = (source === 'xc'
    ? `Download ${title} from the Extreme Classification Repository (${XC_REPOSITORY_URL}), put ${files.join(', ')} `
    : `${title} is built from Debian's package archive (XC text format); put ${files.join(', ')} `) +
    `in <data dir>/${name}/, and pass --data-dir <data dir> or set ${DATASETS_ENV}=<data dir>.`;
  if (!dir) return { missing: files.slice(), message: `${title} not found: no data folder given (--data-dir or ${DATASETS_ENV}). ${how}` };
  const paths = files.map((f) => join(dir, name, f));
  const missing = paths.filter((p) => !existsSync(p));
  if (!missing.length) return { files: paths };
  return { missing, message: `${title} not found: missing ${missing.join(', ')} (data folder from ${from}). ${how}` };
}

/** `findDataset`, throwing its message when files are missing. */
export function requireDataset(name: RealDataset, flag?: string): { files: string[] } {
  const r = findDataset(name, flag);
  if ('message' in r) throw new Error(r.message);
  return r;
}
