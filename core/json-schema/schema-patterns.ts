import { patternSetTooLarge, type PlacedPattern } from '../patterns/user-pattern';

/**
 * The regular expressions a JSON Schema hands ajv, and where: every `pattern` keyword's value
 * and every key of a `patternProperties`, as JSON pointers into the schema. Values that are
 * data, not schemas (`const`, `enum`, `default`, `examples`), are not read: ajv compiles no
 * pattern there. Names under `properties` and the like are names, not keywords, so a property
 * called `pattern` is a schema like any other.
 */
export function schemaPatterns(schema: unknown): PlacedPattern[] {
  const found: PlacedPattern[] = [];
  const walk = (value: unknown, where: string, depth: number): void => {
    // Depth and size are bounded before this runs (schemaTooLarge); this stops a cycle all the same.
    if (value === null || typeof value !== 'object' || depth > 64) return;
    if (Array.isArray(value)) {
      value.forEach((item, i) => walk(item, `${where}/${i}`, depth + 1));
      return;
    }
    for (const [key, child] of Object.entries(value)) {
      const at = `${where}/${pointerToken(key)}`;
      if (DATA_KEYWORDS.has(key)) continue;
      if (key === 'pattern' && typeof child === 'string') found.push({ source: child, where: at });
      else if (NAMED_SCHEMAS.has(key) && child !== null && typeof child === 'object' && !Array.isArray(child)) {
        for (const [name, sub] of Object.entries(child)) {
          if (key === 'patternProperties') found.push({ source: name, where: `${at}/${pointerToken(name)}` });
          walk(sub, `${at}/${pointerToken(name)}`, depth + 2);
        }
      } else walk(child, at, depth + 1);
    }
  };
  walk(schema, '', 0);
  return found;
}

const DATA_KEYWORDS = new Set(['const', 'enum', 'default', 'examples']);
/** Keywords whose value maps names to schemas. */
const NAMED_SCHEMAS = new Set(['properties', 'patternProperties', 'definitions', '$defs', 'dependencies', 'dependentSchemas']);

/** RFC 6901: `~` and `/` in a key. */
const pointerToken = (key: string) => key.replace(/~/g, '~0').replace(/\//g, '~1');

/** What is wrong with a schema's patterns (core/patterns/user-pattern.ts), naming where, or null. */
export function schemaPatternsTooLarge(schema: unknown): string | null {
  const problem = patternSetTooLarge(schemaPatterns(schema));
  if (!problem) return null;
  // A `patternProperties` key is itself the pattern, perhaps a long one: its start names it.
  const { where: full } = problem.pattern;
  const where = full.length > 120 ? `${full.slice(0, 120)}…` : full;
  return `the pattern at \`${where}\` ${problem.reason}`;
}
