// The layers of src/ and the one direction their imports may point: down. `npm test` checks it
// (test/architecture.test.ts); `npx depcruise src` prints any import that breaks it. docs/design.md
// describes each layer.
//
// LAYERS lists the layers from the bottom up. A module may import its own layer and any layer listed
// before it; modules in one row (siblings) do not import each other. Type-only imports count: a type
// is a dependency too. No module may be part of an import circle.
const LAYERS = [
  // Plain helpers: files, text, numbers, random numbers.
  [{ name: 'util', path: '^src/util/' }],
  // Sparse data: the CSR layout, readers, writers, generators.
  [{ name: 'datasets', path: '^src/datasets/' }],
  // The compiled addon and the memory layouts it reads (the contract with native/).
  [{ name: 'native', path: '^src/native/' }],
  // Raw text to features; LSH tables.
  [{ name: 'text', path: '^src/text/' }, { name: 'lsh', path: '^src/lsh/' }],
  // The model: layers, weights, file format, prediction and evaluation, the worker pool.
  [{ name: 'network', path: '^src/network/' }],
  // Training: the fit loop, selection, checkpoints, distribution, planning.
  [{ name: 'train', path: '^src/train/' }],
  // What a command does, as one library call each (train(job), plan(...)); the prediction server.
  [{ name: 'job', path: '^src/job/' }, { name: 'serve', path: '^src/serve/' }],
  // The command line: parses, calls the job layer, prints.
  [{ name: 'cli', path: '^src/(cli/|cli\\.ts$)' }],
  // The package's public entry points: import (index.ts) and require (require.cts, which hands over index.ts).
  [{ name: 'entry', path: '^src/(index\\.ts|require\\.cts)$' }],
];

const forbidden = [
  {
    name: 'no-circular',
    severity: 'error',
    comment: 'Modules that import each other, directly or through others: one of them belongs lower.',
    from: { path: '^src/' },
    to: { circular: true },
  },
  {
    name: 'no-tests-or-benchmarks',
    severity: 'error',
    comment: 'The library does not import its tests or benchmarks.',
    from: { path: '^src/' },
    to: { path: '^(test|bench)/' },
  },
  {
    name: 'no-unlayered',
    severity: 'error',
    comment: 'Every module of src/ belongs to a layer: add a new folder to LAYERS in .dependency-cruiser.cjs.',
    from: { path: '^src/', pathNot: LAYERS.flat().map((l) => l.path).join('|') },
    to: {},
  },
];
LAYERS.forEach((row, r) => {
  const above = LAYERS.slice(r + 1).flat();
  for (const layer of row) {
    const siblings = row.filter((l) => l !== layer);
    const banned = [...above, ...siblings];
    if (banned.length === 0) continue;
    forbidden.push({
      name: `${layer.name}-imports-down`,
      severity: 'error',
      comment: `${layer.name} imports only the layers below it (${LAYERS.slice(0, r).flat().map((l) => l.name).join(', ') || 'none'}), ` +
        `not ${banned.map((l) => l.name).join(', ')}.`,
      from: { path: layer.path },
      to: { path: banned.map((l) => l.path).join('|') },
    });
  }
});

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden,
  options: {
    doNotFollow: { path: 'node_modules' },
    includeOnly: '^src/',
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'] },
  },
};
