import { z } from 'zod';

const contentPart = z.looseObject({ type: z.string() });
const message = z.looseObject({
  role: z.enum(['system', 'developer', 'user', 'assistant', 'tool']),
  content: z.union([z.string(), z.array(contentPart), z.null()]).optional(),
});

/**
 * The chat request as spec 4.1 bounds it. Unknown top-level fields pass through untouched
 * (they are forwarded to the provider), so the object is loose.
 */
export const chatRequestSchema = z.looseObject({
  model: z.string().min(1),
  messages: z.array(message).min(1),
  stream: z.boolean().optional(),
  max_tokens: z.number().int().positive().optional(),
  max_completion_tokens: z.number().int().positive().optional(),
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().min(0).max(1).optional(),
  stop: z.union([z.string(), z.array(z.string()).max(4)]).optional(),
  frequency_penalty: z.number().min(-2).max(2).optional(),
  presence_penalty: z.number().min(-2).max(2).optional(),
  seed: z.number().int().optional(),
  user: z.string().optional(),
  fallbacks: z.array(z.string()).max(5).optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
  logging: z.boolean().optional(),
});

export type ChatRequest = z.infer<typeof chatRequestSchema>;
