#!/usr/bin/env node
// `gw`: the operator CLI. Runs the TypeScript source directly through tsx.
require('tsx/cjs');
require('./gw.ts');
