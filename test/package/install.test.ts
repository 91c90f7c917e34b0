// The npm package as a user gets it: `npm pack` (prepack puts the compiled addon into prebuilds/), then an
// install of the tarball into an empty project with install scripts off (npm 11's default for
// dependencies), then `npx sublinear demo --json`. It must train and evaluate on the prebuilt binary,
// with nothing compiled (no build/ in the installed package), the worker threads included.
//
// Packing runs in a copy of the repository's sources (node_modules linked), so the prepare step's tsc
// never rewrites this checkout's dist/ while other test files run from it. Dependencies come from the npm
// cache when they are there (--offline first, then --prefer-offline); the test is skipped, saying why,
// when the registry cannot be reached for what the cache lacks. Slow (pack, install, a demo run): about
// half a minute, several minutes if prepack must compile the addon first (build/ not stamped by
// scripts/build-native.cjs).
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '../..');
const PREBUILD = 'prebuilds/linux-x64/sublinear.napi.glibc.node';
const ARM64_PREBUILD = 'prebuilds/linux-arm64/sublinear.napi.glibc.node';
/** prepack cross-compiles the linux-arm64 addon where this compiler is found (scripts/prebuild-arm64.cjs). */
const crossCompiler = spawnSync('aarch64-linux-gnu-g++', ['--version']).status === 0;
const supported = process.platform === 'linux' && process.arch === 'x64' && !existsSync('/etc/alpine-release');
const NETWORK_ERRORS = /ENOTCACHED|ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|network/;

const work = mkdtempSync(join(tmpdir(), 'sublinear-package-test-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function run(cmd: string, args: string[], cwd: string, timeoutMs: number, env: NodeJS.ProcessEnv = {}): SpawnSyncReturns<string> {
  const r = spawnSync(cmd, args, {
    cwd, encoding: 'utf8', timeout: timeoutMs, maxBuffer: 64 << 20,
    // npm_config_* of an enclosing `npm test` would leak into these npm runs (e.g. its cwd and prefix).
    env: { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k))), ...env },
  });
  if (r.error) throw r.error;
  return r;
}

/** The repository's sources (what `npm pack` may read), the stamped addon build if any, node_modules linked. */
function copySources(dest: string): void {
  mkdirSync(dest);
  for (const name of ['package.json', 'tsconfig.json', 'binding.gyp', 'README.md', 'LICENSE', 'native', 'scripts', 'src', 'datasets', 'bench', 'docs']) {
    cpSync(join(ROOT, name), join(dest, name), { recursive: true });
  }
  for (const f of ['sublinear.node', 'sublinear.build.json']) {
    const from = join(ROOT, 'build', 'Release', f);
    if (existsSync(from)) cpSync(from, join(dest, 'build', 'Release', f));
  }
  // The cross-compiled linux-arm64 binary and its stamp (prepack reuses it when up to date).
  for (const f of [ARM64_PREBUILD, 'build/arm64/sublinear.build.json']) {
    if (existsSync(join(ROOT, f))) cpSync(join(ROOT, f), join(dest, f));
  }
  symlinkSync(join(ROOT, 'node_modules'), join(dest, 'node_modules'), 'dir');
}

interface Installed {
  /** The packed tarball's file list. */
  files: string[];
  /** The consumer project (a default `npm init`: CommonJS) and the package installed in it. */
  project: string;
  installed: string;
}

let packedAndInstalled: Installed | string | undefined;

/** Packs the package and installs the tarball into an empty project, once for the tests below; a string says why it cannot. */
function packAndInstall(): Installed | string {
  if (packedAndInstalled) return packedAndInstalled;
  const src = join(work, 'src');
  copySources(src);
  const pack = run('npm', ['pack', '--json', '--pack-destination', work], src, 600_000);
  expect(pack.status, pack.stderr).toBe(0);
  const packed = JSON.parse(pack.stdout.slice(pack.stdout.indexOf('['))) as { filename: string; files: { path: string }[] }[];
  const files = packed[0]!.files.map((f) => f.path);
  const tarball = join(work, packed[0]!.filename);

  const project = join(work, 'project');
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'sublinear-install-test', version: '1.0.0', private: true }));
  const base = ['install', '--ignore-scripts', '--no-audit', '--no-fund', tarball];
  let install = run('npm', [...base, '--offline'], project, 300_000);
  if (install.status !== 0) install = run('npm', [...base, '--prefer-offline'], project, 300_000);
  if (install.status !== 0 && NETWORK_ERRORS.test(install.stderr)) {
    return (packedAndInstalled = `npm could not fetch the dependencies (not in the npm cache, registry unreachable): ${install.stderr.trim().split('\n').slice(0, 2).join(' ')}`);
  }
  expect(install.status, install.stderr).toBe(0);
  return (packedAndInstalled = { files, project, installed: join(project, 'node_modules', 'sublinear') });
}

describe.skipIf(!supported)('npm package (linux-x64, glibc)', () => {
  it('installs from the packed tarball with install scripts off and runs `npx sublinear demo` on the prebuilt addon', (ctx) => {
    const p = packAndInstall();
    if (typeof p === 'string') return ctx.skip(p);
    const { files, project, installed } = p;
    expect(files).toContain(PREBUILD);
    if (crossCompiler) expect(files).toContain(ARM64_PREBUILD);
    expect(files).toContain('LICENSE');
    expect(files.some((f) => f.startsWith('build/'))).toBe(false);
    // No benchmarks (they run from a clone) and no source maps (their sources are not shipped).
    expect(files.filter((f) => f.startsWith('dist/bench/') || f.startsWith('bench/'))).toEqual([]);
    expect(files.filter((f) => f.endsWith('.map'))).toEqual([]);
    expect(existsSync(join(installed, PREBUILD))).toBe(true);

    const demo = run('npx', ['--no-install', 'sublinear', 'demo', '--json'], project, 300_000);
    expect(demo.status, demo.stderr).toBe(0);
    const result = JSON.parse(demo.stdout.trim().split('\n').at(-1)!) as { p1: number; workers: number };
    expect(result.p1).toBeGreaterThan(0.9);
    expect(result.workers).toBeGreaterThanOrEqual(1);
    // Nothing was compiled: no build/ in the installed package.
    expect(readdirSync(installed)).not.toContain('build');

    // The main thread and a worker thread load the same (prebuilt) file.
    const nativeUrl = JSON.stringify(pathToFileURL(join(installed, 'dist', 'src', 'native', 'addon.js')).href);
    writeFileSync(join(project, 'worker.mjs'), `import { parentPort } from 'node:worker_threads';
const m = await import(${nativeUrl});
m.native();
parentPort.postMessage(m.addonPath());
`);
    writeFileSync(join(project, 'probe.mjs'), `import { Worker } from 'node:worker_threads';
const { native, addonPath } = await import(${nativeUrl});
native();
const w = new Worker(new URL('./worker.mjs', import.meta.url));
const inWorker = await new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject); });
await w.terminate();
console.log(JSON.stringify({ main: addonPath(), worker: inWorker }));
`);
    const loaded = run(process.execPath, ['probe.mjs'], project, 60_000);
    expect(loaded.status, loaded.stderr).toBe(0);
    const paths = JSON.parse(loaded.stdout.trim()) as { main: string; worker: string };
    expect(paths.main).toBe(join(installed, PREBUILD));
    expect(paths.worker).toBe(paths.main);
  }, 900_000);

  it('loads with require() in a CommonJS project (Node >= 20.19) and trains, predicts and saves through it', (ctx) => {
    const p = packAndInstall();
    if (typeof p === 'string') return ctx.skip(p);
    // The project is a default `npm init` one: CommonJS. require() of the package's ES modules fails on
    // a module graph with a top-level await (ERR_REQUIRE_ASYNC_MODULE); an ExperimentalWarning would go to stderr.
    const script = `
const s = require('sublinear');
const { Network, synthesize, defaultConfig, train } = s;
(async () => {
  const data = synthesize({ shape: 'tiny', points: 300, seed: 3 });
  const networkConfig = defaultConfig({ features: data.features, labels: data.labels, points: data.points }, 1);
  const { network: net } = await train({ train: data, networkConfig, epochs: 2, workers: 1, unsavedOk: true });
  const pred = await net.predict(data, { k: 1, workers: 1 });
  await net.save('m.sl');
  const back = await Network.load('m.sl');
  console.log(JSON.stringify({ esmSame: (await import('sublinear')).Network === Network, labels: pred.labels.length, layers: back.config.layers.length }));
})().catch((e) => { console.error(e); process.exit(1); });
`;
    const r = run(process.execPath, ['-e', script], p.project, 120_000);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    // require and import get the same module: one Network class.
    expect(JSON.parse(r.stdout.trim())).toEqual({ esmSame: true, labels: 300, layers: 2 });
  }, 900_000);

  it('has typings that compile in a strict TypeScript project with "types": [] (no @types/node), CommonJS and ESM', (ctx) => {
    const p = packAndInstall();
    if (typeof p === 'string') return ctx.skip(p);
    const dir = join(work, 'ts-consumer');
    mkdirSync(dir);
    symlinkSync(join(p.project, 'node_modules'), join(dir, 'node_modules'), 'dir');
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'ts-consumer', version: '1.0.0', private: true }));
    // tsc --init's settings (TypeScript 5.9), with the library checks on: skipLibCheck would hide errors in
    // the package's .d.ts files (an import of node:http's types becomes any instead of failing).
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({
      compilerOptions: {
        module: 'nodenext', target: 'esnext', types: [], strict: true, skipLibCheck: false, outDir: 'out',
        noUncheckedIndexedAccess: true, exactOptionalPropertyTypes: true, verbatimModuleSyntax: true, isolatedModules: true,
      },
      files: ['main.cts', 'main.mts'],
    }));
    const use = (prefix: string) => `
const net = new ${prefix}Network(${prefix}defaultConfig({ features: 8, labels: 3, points: 10 }));
const metrics: ${prefix}Metrics | undefined = undefined;
const serving: Promise<${prefix}PredictionServer> | undefined = metrics ? ${prefix}serve(net, { port: 0 }) : undefined;
console.log(JSON.stringify({ layers: net.config.layers.length, serving: serving !== undefined }));
`;
    writeFileSync(join(dir, 'main.cts'), `import sublinear = require('sublinear');\n${use('sublinear.')}`);
    writeFileSync(join(dir, 'main.mts'), `import { Network, defaultConfig, serve, type Metrics, type PredictionServer } from 'sublinear';\n${use('')}`);
    const tsc = run(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', '.'], dir, 120_000);
    expect(tsc.status, tsc.stdout + tsc.stderr).toBe(0);
    for (const out of ['main.cjs', 'main.mjs']) {
      const r = run(process.execPath, [join('out', out)], dir, 60_000);
      expect(r.status, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout.trim())).toEqual({ layers: 2, serving: false });
    }
  }, 300_000);
});
