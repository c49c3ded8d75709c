import { z } from 'zod';
import { RESOURCES } from '../../api/manage/resources';

/**
 * The exact wire shape of a resource answer: the resource's declared read fields, the envelope,
 * and nothing else. A strict parse catches an undeclared field, such as a secret leaking into
 * a read, and keeps the OpenAPI document honest about answers.
 */
export function resourceShape(type: string, extra: z.ZodRawShape = {}): z.ZodObject {
  const resource = RESOURCES.find((r) => r.type === type);
  if (!resource) throw new Error(`no resource type ${type}`);
  // A data type (findings) carries no version (spec 4.4 data operations).
  const versioned = resource.data ? {} : { version: z.number().int().positive(), managed_by: z.string() };
  return resource.readSchema.extend({ id: z.string(), object: z.literal(resource.object), ...versioned, ...extra }).strict();
}

export function expectShape(type: string, body: unknown, extra: z.ZodRawShape = {}): void {
  const parsed = resourceShape(type, extra).safeParse(body);
  if (!parsed.success) throw new Error(`${type} answer does not match its declared shape: ${z.prettifyError(parsed.error)}\n${JSON.stringify(body)}`);
}
