// require('sublinear'): the package's CommonJS entry (the "require" condition of package.json's exports).
//
// The package is ES modules. Node >= 20.19 and >= 22.12 let require() load an ES module graph
// synchronously, as long as no module in it uses top-level await (none does: test/package/install.test.ts
// requires the installed package from a CommonJS project). This file hands require() the very module that
// `import` gets (one copy of every class, so instanceof works across both), and on an older Node, where
// require() of an ES module throws ERR_REQUIRE_ESM, says which versions can and that import() works on all.
function load(): typeof import('./index.js') {
  try {
    return require('./index.js') as typeof import('./index.js');
  } catch (e) {
    if ((e as { code?: string }).code !== 'ERR_REQUIRE_ESM') throw e;
    throw new Error(`sublinear is an ES module package: require('sublinear') needs Node >= 20.19 (20.x) or >= 22.12, ` +
      `and this is Node ${process.versions.node}. Use \`const { Network } = await import('sublinear')\`, which works on every Node >= 20, ` +
      'or upgrade Node', { cause: e });
  }
}

export = load();
