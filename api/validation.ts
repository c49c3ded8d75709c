import type { z } from 'zod';
import { GatewayError } from '../core/errors';

/** Validates input with a zod schema; the first problem becomes a 400 naming the field. */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown, where = 'body'): z.infer<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const field = issue.path.length > 0 ? issue.path.join('.') : where;
  throw new GatewayError('invalid_request', `Invalid \`${field}\`: ${issue.message}`);
}
