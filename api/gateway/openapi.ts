import Router from '@koa/router';
import { z } from 'zod';
import type { GatewayState } from '../context';
import { createDocument } from 'zod-openapi';
import { chatRequestSchema } from './chat-request';
import { messagesRequestSchema } from './protocols/anthropic-messages';
import { responsesRequestSchema } from './protocols/openai-responses';
import { embeddingsRequestSchema } from './embeddings';
import { batchCreateSchema } from './batches';

/**
 * The gateway's own OpenAPI 3.1 document (`GET /v1/openapi.json`): the model endpoints each
 * client protocol calls, their requests from the same zod schemas that validate them. The
 * management API has its own (`/manage/v1/openapi.json`).
 */

const openAiError = z.object({ error: z.object({ message: z.string(), type: z.string(), code: z.string().nullable() }) })
  .meta({ id: 'Error', description: 'Every error answer of the OpenAI-shaped endpoints (spec 2.4).' });
const anthropicError = z.object({ type: z.literal('error'), error: z.object({ type: z.string(), message: z.string(), code: z.string().nullable(), gateway_type: z.string() }) })
  .meta({ id: 'AnthropicError', description: 'Errors of `/v1/messages`: Anthropic\'s shape, with the gateway\'s `code` and its own `type` (`gateway_type`) inside.' });

const errorsOf = (schema: z.ZodType) => ({
  '4XX': { description: 'Refused: see the error\'s type and code.', content: { 'application/json': { schema } } },
  '5XX': { description: 'No provider could answer, or a defect.', content: { 'application/json': { schema } } },
});

const answer = (description: string, streamed: string) => ({
  '200': {
    description,
    content: {
      'application/json': { schema: z.looseObject({}).meta({ description }) },
      'text/event-stream': { schema: z.string().meta({ description: streamed }) },
    },
  },
});

const fileObject = z.object({
  id: z.string(), object: z.literal('file'), bytes: z.number().int(), created_at: z.number().int(), expires_at: z.number().int().nullable(),
  filename: z.string(), purpose: z.enum(['batch', 'batch_output']), status: z.literal('processed'), status_details: z.null(),
}).meta({ id: 'File', description: 'A file of OpenAI\'s Files API: a batch\'s input, or the output and error files a batch wrote. Kept for the organization\'s prompt retention.' });
const batchObject = z.looseObject({
  id: z.string(), object: z.literal('batch'), endpoint: z.string(), input_file_id: z.string(), completion_window: z.string(),
  status: z.enum(['validating', 'failed', 'in_progress', 'finalizing', 'completed', 'expired', 'cancelling', 'cancelled']),
  output_file_id: z.string().nullable(), error_file_id: z.string().nullable(),
  errors: z.object({ object: z.literal('list'), data: z.array(z.object({ code: z.string(), message: z.string(), param: z.string().nullable(), line: z.number().int().nullable() })) }).nullable(),
  request_counts: z.object({ total: z.number().int(), completed: z.number().int(), failed: z.number().int() }),
  metadata: z.record(z.string(), z.string()).nullable(),
  usage_cost: z.number().meta({ description: 'What the items cost so far, in US dollars (the gateway\'s estimate, as `usage.cost`).' }),
  rerun_count: z.number().int().meta({ description: 'Items called again after a lost attempt (a worker that died mid-call); each call is billed as the provider billed it.' }),
}).meta({ id: 'Batch', description: 'A batch as OpenAI\'s Batch API shows it, with the gateway\'s cost and re-run count.' });
const openAIList = (item: z.ZodType) => z.object({ object: z.literal('list'), data: z.array(item), first_id: z.string().nullable(), last_id: z.string().nullable(), has_more: z.boolean() });
const listQuery = z.object({ limit: z.number().int().min(1).optional(), after: z.string().optional(), order: z.enum(['asc', 'desc']).optional() });
const idParam = { path: z.object({ id: z.string() }) };
const json = (description: string, schema: z.ZodType) => ({ '200': { description, content: { 'application/json': { schema } } } });

const messageBatchObject = z.looseObject({
  id: z.string(), type: z.literal('message_batch'), processing_status: z.enum(['in_progress', 'canceling', 'ended']),
  request_counts: z.object({ processing: z.number().int(), succeeded: z.number().int(), errored: z.number().int(), canceled: z.number().int(), expired: z.number().int() }),
  created_at: z.string(), expires_at: z.string(), ended_at: z.string().nullable(), cancel_initiated_at: z.string().nullable(), archived_at: z.null(), results_url: z.string().nullable(),
  usage_cost: z.number(), rerun_count: z.number().int(),
}).meta({ id: 'MessageBatch', description: 'A message batch as Anthropic\'s Message Batches API shows it, with the gateway\'s cost and re-run count.' });
const messageBatchCreate = z.object({
  requests: z.array(z.object({ custom_id: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/), params: z.looseObject({ model: z.string(), max_tokens: z.number().int(), messages: z.array(z.unknown()) }) })).min(1).max(100_000),
});

let cached: ReturnType<typeof createDocument> | null = null;

export function gatewayOpenApiDocument(): ReturnType<typeof createDocument> {
  cached ??= createDocument({
    openapi: '3.1.0',
    info: {
      title: 'Model gateway API',
      version: '1',
      description: 'Model calls through the gateway: OpenAI chat completions, Anthropic Messages, OpenAI Responses and OpenAI embeddings, each served by any connected provider with the same routing, failover, spend limits, cache, guardrails and request log.',
    },
    servers: [{ url: '/v1' }],
    security: [{ bearer: [] }, { apiKey: [] }],
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'A gateway key (`gw_...`).' },
        apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key', description: 'The same gateway key, as Anthropic\'s clients send it.' },
      },
    },
    paths: {
      '/chat/completions': {
        post: {
          tags: ['chat'], operationId: 'createChatCompletion', summary: 'OpenAI chat completions (spec 4.1).',
          requestBody: { content: { 'application/json': { schema: chatRequestSchema } } },
          responses: { ...answer('A chat completion (spec 2.2).', 'Chat completion chunks, then `[DONE]`.'), ...errorsOf(openAiError) },
        },
      },
      '/messages': {
        post: {
          tags: ['messages'], operationId: 'createMessage', summary: 'Anthropic Messages, served by any connection; an Anthropic connection takes it as it came.',
          requestBody: { content: { 'application/json': { schema: messagesRequestSchema } } },
          responses: { ...answer('A message, with the gateway\'s `provider`, `connection`, `route` and `usage.cost`.', 'Anthropic\'s events: message_start, content_block_*, message_delta, message_stop.'), ...errorsOf(anthropicError) },
        },
      },
      '/messages/count_tokens': {
        post: {
          tags: ['messages'], operationId: 'countMessageTokens', summary: 'The gateway\'s estimate of a Messages request\'s input tokens (what its spend hold uses); no provider is called.',
          requestBody: { content: { 'application/json': { schema: messagesRequestSchema.omit({ max_tokens: true }) } } },
          responses: { '200': { description: 'The estimate.', content: { 'application/json': { schema: z.object({ input_tokens: z.number().int() }) } } }, ...errorsOf(anthropicError) },
        },
      },
      '/responses': {
        post: {
          tags: ['responses'], operationId: 'createResponse', summary: 'OpenAI Responses, served by any connection; kept for `previous_response_id` unless `store: false` (where the organization keeps prompts).',
          requestBody: { content: { 'application/json': { schema: responsesRequestSchema } } },
          responses: { ...answer('A response object, with the gateway\'s `provider`, `connection`, `route` and `usage.cost`.', 'The semantic events: response.created ... response.completed, or error.'), ...errorsOf(openAiError) },
        },
      },
      '/responses/{id}': {
        get: {
          tags: ['responses'], operationId: 'getResponse', summary: 'A kept response, within the organization\'s prompt retention and the key\'s reach.',
          requestParams: { path: z.object({ id: z.string() }) },
          responses: { '200': { description: 'The response object as it was answered.', content: { 'application/json': { schema: z.looseObject({ id: z.string(), object: z.literal('response') }) } } }, ...errorsOf(openAiError) },
        },
        delete: {
          tags: ['responses'], operationId: 'deleteResponse', summary: 'Deletes a kept response.',
          requestParams: { path: z.object({ id: z.string() }) },
          responses: { '200': { description: 'Deleted.', content: { 'application/json': { schema: z.object({ id: z.string(), object: z.literal('response'), deleted: z.literal(true) }) } } }, ...errorsOf(openAiError) },
        },
      },
      '/embeddings': {
        post: {
          tags: ['embeddings'], operationId: 'createEmbeddings', summary: 'OpenAI embeddings, served by OpenAI, Azure, Gemini and OpenAI-compatible connections; priced per input token, kept in the response cache.',
          requestBody: { content: { 'application/json': { schema: embeddingsRequestSchema } } },
          responses: {
            '200': {
              description: 'One vector per input, as floats or base64 float32 (`encoding_format`); `usage` with `prompt_tokens`, `cost`, `price_source` (and `estimated: true` where the provider states no count); `provider`, `connection`, `route`, `route_name`.',
              content: { 'application/json': { schema: z.looseObject({ object: z.literal('list'), data: z.array(z.object({ object: z.literal('embedding'), index: z.number().int(), embedding: z.union([z.array(z.number()), z.string()]) })), model: z.string() }) } },
            },
            ...errorsOf(openAiError),
          },
        },
      },
      '/models': {
        get: {
          tags: ['models'], operationId: 'listModels', summary: 'The models and routes the calling key can call (spec 4.3); `type` says whether each chats or embeds.',
          responses: {
            '200': {
              description: 'The list.',
              content: { 'application/json': { schema: z.object({ object: z.literal('list'), data: z.array(z.object({ id: z.string(), object: z.literal('model'), created: z.number().int(), owned_by: z.string(), type: z.enum(['chat', 'embedding']) })) }) } },
            },
            ...errorsOf(openAiError),
          },
        },
      },
      '/files': {
        post: {
          tags: ['batches'], operationId: 'createFile', summary: 'Uploads a batch\'s JSONL input (`purpose: batch`, up to 200 MB), streamed to storage.',
          requestBody: { content: { 'multipart/form-data': { schema: z.object({ purpose: z.literal('batch'), file: z.string().meta({ format: 'binary' }) }) } } },
          responses: { ...json('The stored file.', fileObject), ...errorsOf(openAiError) },
        },
        get: {
          tags: ['batches'], operationId: 'listFiles', summary: 'The files within the key\'s reach, newest first; `purpose` filters.',
          requestParams: { query: listQuery.extend({ purpose: z.enum(['batch', 'batch_output']).optional() }) },
          responses: { ...json('A page of files.', openAIList(fileObject)), ...errorsOf(openAiError) },
        },
      },
      '/files/{id}': {
        get: { tags: ['batches'], operationId: 'getFile', summary: 'One file.', requestParams: idParam, responses: { ...json('The file.', fileObject), ...errorsOf(openAiError) } },
        delete: {
          tags: ['batches'], operationId: 'deleteFile', summary: 'Deletes a file and its content (refused while a batch still reads it).', requestParams: idParam,
          responses: { ...json('Deleted.', z.object({ id: z.string(), object: z.literal('file'), deleted: z.literal(true) })), ...errorsOf(openAiError) },
        },
      },
      '/files/{id}/content': {
        get: {
          tags: ['batches'], operationId: 'getFileContent', summary: 'A file\'s content: JSONL, one line per request or per answer.', requestParams: idParam,
          responses: { '200': { description: 'The JSONL.', content: { 'application/jsonl': { schema: z.string() } } }, ...errorsOf(openAiError) },
        },
      },
      '/batches': {
        post: {
          tags: ['batches'], operationId: 'createBatch', summary: 'Starts a batch over an uploaded file; its items run through the gateway\'s own request path (routes, limits, guardrails, cache, request log).',
          requestBody: { content: { 'application/json': { schema: batchCreateSchema } } },
          responses: { ...json('The batch, `validating`.', batchObject), ...errorsOf(openAiError) },
        },
        get: {
          tags: ['batches'], operationId: 'listBatches', summary: 'The batches within the key\'s reach, newest first.', requestParams: { query: listQuery },
          responses: { ...json('A page of batches.', openAIList(batchObject)), ...errorsOf(openAiError) },
        },
      },
      '/batches/{id}': {
        get: { tags: ['batches'], operationId: 'getBatch', summary: 'One batch, with its progress.', requestParams: idParam, responses: { ...json('The batch.', batchObject), ...errorsOf(openAiError) } },
      },
      '/batches/{id}/cancel': {
        post: {
          tags: ['batches'], operationId: 'cancelBatch', summary: 'Stops starting items; those finished are kept, the rest are named cancelled in the error file.', requestParams: idParam,
          responses: { ...json('The batch, `cancelling`.', batchObject), ...errorsOf(openAiError) },
        },
      },
      '/messages/batches': {
        post: {
          tags: ['batches'], operationId: 'createMessageBatch', summary: 'Anthropic Message Batches: up to 100,000 Messages requests (256 MB), streamed to storage and checked as they come; each runs through `/v1/messages`.',
          requestBody: { content: { 'application/json': { schema: messageBatchCreate } } },
          responses: { ...json('The batch, `in_progress`.', messageBatchObject), ...errorsOf(anthropicError) },
        },
        get: {
          tags: ['batches'], operationId: 'listMessageBatches', summary: 'Message batches within the key\'s reach, newest first (`after_id`, `before_id`, `limit`).',
          requestParams: { query: z.object({ limit: z.number().int().min(1).max(1000).optional(), after_id: z.string().optional(), before_id: z.string().optional() }) },
          responses: { ...json('A page.', z.object({ data: z.array(messageBatchObject), has_more: z.boolean(), first_id: z.string().nullable(), last_id: z.string().nullable() })), ...errorsOf(anthropicError) },
        },
      },
      '/messages/batches/{id}': {
        get: { tags: ['batches'], operationId: 'getMessageBatch', summary: 'One message batch.', requestParams: idParam, responses: { ...json('The batch.', messageBatchObject), ...errorsOf(anthropicError) } },
        delete: {
          tags: ['batches'], operationId: 'deleteMessageBatch', summary: 'Deletes an ended batch and its files.', requestParams: idParam,
          responses: { ...json('Deleted.', z.object({ id: z.string(), type: z.literal('message_batch_deleted') })), ...errorsOf(anthropicError) },
        },
      },
      '/messages/batches/{id}/cancel': {
        post: { tags: ['batches'], operationId: 'cancelMessageBatch', summary: 'Stops starting requests; finished results are kept, the rest end `canceled`.', requestParams: idParam, responses: { ...json('The batch, `canceling`.', messageBatchObject), ...errorsOf(anthropicError) } },
      },
      '/messages/batches/{id}/results': {
        get: {
          tags: ['batches'], operationId: 'getMessageBatchResults', summary: 'An ended batch\'s results: JSONL, one `{custom_id, result}` a request, in input order.', requestParams: idParam,
          responses: { '200': { description: 'The JSONL.', content: { 'application/binary': { schema: z.string() } } }, ...errorsOf(anthropicError) },
        },
      },
      '/openapi.json': {
        get: { tags: ['meta'], operationId: 'getGatewayOpenApiDocument', summary: 'This document (no key needed).', security: [], responses: { '200': { description: 'OpenAPI 3.1.' } } },
      },
    },
  });
  return cached;
}

/** `GET /v1/openapi.json`, before the gateway's key check: the document names no secret. */
export function gatewayDocsRouter(): Router<GatewayState> {
  const router = new Router<GatewayState>();
  router.get('/v1/openapi.json', (ctx) => {
    ctx.body = gatewayOpenApiDocument();
  });
  return router;
}
