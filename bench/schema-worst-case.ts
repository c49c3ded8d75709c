/**
 * Issue 33: the worst case a tenant's decision schema can make the API's event loop do. Each
 * row is one validation of an answer against a hostile schema, CPU time measured in this process
 * (`process.cpuUsage`), on the gateway's engine (RE2 patterns, bounded uniqueItems) and, for the
 * pattern, on JavaScript's backtracking RegExp at sizes small enough to finish, to show why.
 *
 *   npx tsx bench/schema-worst-case.ts
 */
import { compileOutputSchema, schemaViolation } from '../core/decisions/output-schema';
import { withoutCodeFence } from '../core/decisions/answer';

function cpuMs(work: () => unknown): number {
  const start = process.cpuUsage();
  work();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000;
}

function validator(schema: Record<string, unknown>) {
  const compiled = compileOutputSchema(schema);
  if (!compiled.ok) throw new Error(compiled.reason);
  return compiled.validate;
}

const rows: Array<[string, string, number]> = [];
const catastrophic = validator({ type: 'object', properties: { answer: { type: 'string', pattern: '^(a+)+$' } } });
for (const n of [50, 5_000, 100_000]) {
  const answer = { answer: `${'a'.repeat(n)}!` };
  schemaViolation(catastrophic, answer);
  rows.push([`pattern ^(a+)+$, ${n} a then !`, 'gateway (RE2)', cpuMs(() => schemaViolation(catastrophic, answer))]);
}
for (const n of [20, 22, 24]) {
  const text = `${'a'.repeat(n)}!`;
  rows.push([`pattern ^(a+)+$, ${n} a then !`, 'JavaScript RegExp (before)', cpuMs(() => /^(a+)+$/.test(text))]);
}
const unique = validator({ type: 'object', properties: { items: { type: 'array', uniqueItems: true } } });
const bound = { items: Array.from({ length: 2_000 }, (_, i) => ({ n: i, text: 'x'.repeat(20) })) };
schemaViolation(unique, bound);
rows.push(['uniqueItems, 2,000 distinct objects (the bound)', 'gateway (canonical text in a set)', cpuMs(() => schemaViolation(unique, bound))]);
const long = { items: Array.from({ length: 200_000 }, (_, i) => ({ n: i })) };
rows.push(['uniqueItems, 200,000 objects (past the bound)', 'gateway (refused by length)', cpuMs(() => schemaViolation(unique, long))]);
const thousand = Array.from({ length: 1_000 }, (_, i) => ({ n: i }));
rows.push(['uniqueItems, 1,000 distinct objects', 'gateway (canonical text in a set)', cpuMs(() => schemaViolation(unique, { items: thousand }))]);
const pairwise = (items: unknown[]) => items.every((a, i) => items.every((b, j) => j <= i || JSON.stringify(a) !== JSON.stringify(b)));
rows.push(['uniqueItems, 1,000 distinct objects', 'pairwise comparison (ajv\'s way, before)', cpuMs(() => pairwise(thousand))]);
const fence = `\`\`\`${' \n'.repeat(200_000)}x`;
rows.push(['code fence, 400,000 characters unclosed', 'gateway (string steps)', cpuMs(() => withoutCodeFence(fence))]);

console.log('| case | engine | CPU ms |');
console.log('|---|---|---:|');
for (const [what, engine, ms] of rows) console.log(`| ${what} | ${engine} | ${ms.toFixed(2)} |`);
