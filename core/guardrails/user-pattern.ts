import type { RE2JS } from 're2js';

/**
 * Compiles a user pattern with RE2 semantics: linear time, so no input can make it backtrack.
 * `re2js` (about 0.5 MB of heap) is loaded by the first pattern, when a policy with a `regex`
 * rule is written or compiled, not at start; a `require`, as policy-cache.ts explains.
 */
export function compileUserPattern(source: string, caseInsensitive: boolean): RE2JS {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded on first use, see above
  const { RE2JS: re2 } = require('re2js') as typeof import('re2js');
  return re2.compile(source, caseInsensitive ? re2.CASE_INSENSITIVE : 0);
}
