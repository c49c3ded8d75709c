import { z } from 'zod';

const tool = z.looseObject({
  type: z.literal('function'),
  function: z.looseObject({ name: z.string().min(1).max(64), description: z.string().optional(), parameters: z.record(z.string(), z.unknown()).optional(), strict: z.boolean().nullable().optional() }),
});

/** `response_format` (spec 4.1): plain text, JSON mode, or validated JSON-schema output. */
const responseFormat = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('text') }),
  z.looseObject({ type: z.literal('json_object') }),
  z.looseObject({
    type: z.literal('json_schema'),
    json_schema: z.looseObject({
      name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a name is 1 to 64 letters, digits, _ or -'),
      description: z.string().optional(),
      schema: z.record(z.string(), z.unknown()).optional(),
      strict: z.boolean().nullable().optional(),
    }),
  }),
]);

/**
 * The model-facing parameters of a chat request with the bounds of spec 4.1 (and, for the
 * fields the table leaves open, those of the OpenAI API it is compatible with). Each is
 * translated to every wire, refused there with a 400 naming it, or, for the nine sampling
 * parameters only, dropped and named in X-GW-Params-Dropped (core/providers/adapters).
 */
export const CHAT_PARAMETERS = {
  stream: z.boolean().optional(),
  max_tokens: z.number().int().positive().optional(),
  max_completion_tokens: z.number().int().positive().optional(),
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().min(0).max(1).optional(),
  top_k: z.number().int().min(0).optional(),
  stop: z.union([z.string(), z.array(z.string()).max(4)]).optional(),
  frequency_penalty: z.number().min(-2).max(2).optional(),
  presence_penalty: z.number().min(-2).max(2).optional(),
  tools: z.array(tool).max(128).optional(),
  tool_choice: z.union([z.enum(['auto', 'none', 'required']), z.looseObject({ type: z.literal('function'), function: z.object({ name: z.string() }) })]).optional(),
  parallel_tool_calls: z.boolean().optional(),
  response_format: responseFormat.optional(),
  n: z.number().int().min(1).max(128).optional(),
  seed: z.number().int().optional(),
  logprobs: z.boolean().optional(),
  top_logprobs: z.number().int().min(0).max(20).optional(),
  logit_bias: z.record(z.string().regex(/^\d+$/, 'keys are token ids'), z.number().min(-100).max(100)).optional(),
  user: z.string().optional(),
  stream_options: z.looseObject({ include_usage: z.boolean().optional() }).optional(),
};
