#!/usr/bin/env node
// `gw`: the operator CLI. In a development checkout (tsx installed) it runs the TypeScript source;
// otherwise, as in a production install without dev packages, the compiled dist/scripts/gw.js,
// built first when missing or older than its sources (scripts/run-built.cjs).
let tsx = null;
try {
  tsx = require.resolve('tsx/cjs');
} catch {
  // A production install: no TypeScript loader.
}
if (tsx) {
  require(tsx);
  require('./gw.ts');
} else {
  process.argv.splice(2, 0, 'scripts/gw');
  require('./run-built.cjs');
}
