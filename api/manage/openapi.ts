import { manageJobPaths } from './data/jobs';
import { manageBatchPaths } from './data/batches';
import { requestStatsPaths } from './data/request-stats';
import { z } from 'zod';
import { createDocument, type ZodOpenApiOperationObject, type ZodOpenApiPathsObject } from 'zod-openapi';
import { DEFAULT_PAGE_SIZE, listEnvelope, MAX_PAGE_SIZE, pageQuery } from '../../core/paging';
import { PROVIDER_KINDS } from '../../core/providers/kinds';
import { usagePaths } from './data/usage';
import { requestDataPaths } from './data/requests';
import { auditEventPaths } from './data/audit-events';
import { budgetStatusPaths } from './data/budget-status';
import { exportPaths } from './data/export';
import { endUserCapOverridePaths } from './end-user-cap-overrides';
import type { ResourceType } from './resources/resource-type';
import { DELIVERY_LOG_SIZE } from '../../core/webhooks/fan-out';
import { deliveryListSchema } from './webhook-deliveries';

/**
 * The management OpenAPI 3.1 document (spec 4.4), generated from the same zod schemas that
 * validate requests and describe answers, so it cannot drift from what the API does.
 */

const errorSchema = z
  .object({ error: z.object({ message: z.string(), type: z.string(), code: z.string().nullable() }) })
  .meta({ id: 'Error', description: 'Every error answer (spec 2.4).' });

const errors = {
  '4XX': { description: 'Refused: see `error.type` and `error.code`.', content: { 'application/json': { schema: errorSchema } } },
  '5XX': { description: 'A defect or an unreachable dependency.', content: { 'application/json': { schema: errorSchema } } },
};

const idParam = z.object({ id: z.string().meta({ description: 'The resource id.' }) });
const ifMatch = (required: boolean) => {
  const header = z.string().regex(/^"\d+"$/).meta({ description: 'The version you read, quoted: `"3"`. A stale one gives 409 version_conflict.' });
  return z.object({ 'if-match': required ? header : header.optional() });
};
const idempotencyKey = z.object({
  'idempotency-key': z.string().max(255).optional().meta({ description: 'Replays the first answer for 24 hours; scoped to the organization.' }),
});

/** `limit` and `after` on every paged list (core/paging.ts). */
const listParams = pageQuery().extend({
  limit: pageQuery().shape.limit.meta({ description: `Entries per page, 1 to ${MAX_PAGE_SIZE} (default ${DEFAULT_PAGE_SIZE}).` }),
  after: pageQuery().shape.after.meta({ description: 'The `next_cursor` of the previous page; absent or empty reads the first page.' }),
});

function pascal(text: string): string {
  return text.replace(/(^|_)([a-z])/g, (_, __, c: string) => c.toUpperCase());
}

function json(schema: z.ZodType, description: string) {
  return { description, content: { 'application/json': { schema } } };
}

function resourcePaths(resource: ResourceType): ZodOpenApiPathsObject {
  const envelopeFields = resource.data
    ? { id: z.string(), object: z.literal(resource.object) }
    : {
      id: z.string(),
      object: z.literal(resource.object),
      version: z.number().int().meta({ description: 'Send it back in If-Match; also the ETag.' }),
      managed_by: z.string(),
    };
  const item = resource.readSchema.extend(envelopeFields).meta({ id: pascal(resource.object) });
  const scope = (what: 'read' | 'write') => `Scope \`${resource.scope}:${what}\`.`;
  const base = `/${resource.type}`;
  const tags = [resource.type];
  const paths: ZodOpenApiPathsObject = {};
  const at = (path: string) => (paths[path] ??= {});

  const patch = (path: string, params: object): ZodOpenApiOperationObject => ({
    tags,
    operationId: `patch${pascal(resource.object)}`,
    summary: `Change ${resource.object.replace(/_/g, ' ')} fields. ${scope('write')}`,
    requestParams: { ...params, header: ifMatch(true) },
    requestBody: { content: { 'application/json': { schema: resource.patchSchema! } } },
    responses: { '200': json(item, 'The changed resource.'), ...errors },
  });

  if (resource.singleton) {
    at(base).get = { tags, operationId: `get${pascal(resource.object)}`, summary: `Read the organization's ${resource.type}. ${scope('read')}`, responses: { '200': json(item, 'The settings.'), ...errors } };
    if (resource.patchSchema) at(base).patch = patch(base, {});
    return paths;
  }

  const one = `${base}/{id}`;
  if (resource.list) {
    at(base).get = {
      tags,
      operationId: `list${pascal(resource.type)}`,
      summary: `List ${resource.type.replace(/_/g, ' ')}, a page at a time. ${scope('read')}`,
      requestParams: { query: resource.listFilters ? listParams.extend(resource.listFilters.shape) : listParams },
      responses: { '200': json(listEnvelope(item), 'A page of the visible ones.'), ...errors },
    };
  }
  if (resource.create && resource.createSchema) {
    at(base).post = {
      tags,
      operationId: `create${pascal(resource.object)}`,
      summary: `Create a ${resource.object.replace(/_/g, ' ')}. ${scope('write')}`,
      requestParams: { header: idempotencyKey },
      requestBody: { content: { 'application/json': { schema: resource.createSchema } } },
      responses: { '201': json(resource.revealSchema ? item.extend(resource.revealSchema.shape) : item, 'The new resource.'), ...errors },
    };
  }
  at(one).get = {
    tags,
    operationId: `get${pascal(resource.object)}`,
    summary: `Read one ${resource.object.replace(/_/g, ' ')}. ${scope('read')}`,
    requestParams: { path: idParam },
    responses: { '200': json(item, 'The resource.'), ...errors },
  };
  if (resource.patch && resource.patchSchema) at(one).patch = patch(one, { path: idParam });
  if (resource.remove) {
    at(one).delete = {
      tags,
      operationId: `delete${pascal(resource.object)}`,
      summary: `Delete (or revoke, or archive) a ${resource.object.replace(/_/g, ' ')}. ${scope('write')}`,
      requestParams: { path: idParam, header: ifMatch(true), ...(resource.type === 'projects' && { query: z.object({ purge: z.enum(['true', 'false']).optional() }) }) },
      responses: { '200': json(z.union([item, z.object({ id: z.string(), object: z.string(), deleted: z.literal(true) })]), 'What remains, or a deletion marker.'), ...errors },
    };
  }
  for (const [name, action] of Object.entries(resource.collectionActions ?? {})) {
    at(`${base}/${name}`).post = {
      tags,
      operationId: `${name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase())}${pascal(resource.type)}`,
      summary: `${action.summary} ${scope('write')}`,
      requestParams: { header: idempotencyKey },
      requestBody: { content: { 'application/json': { schema: action.schema } } },
      responses: { '200': json(action.answerSchema, 'What was done.'), ...errors },
    };
  }
  for (const [name, action] of Object.entries(resource.actions ?? {})) {
    at(`${one}/${name}`).post = {
      tags,
      operationId: `${name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase())}${pascal(resource.object)}`,
      summary: `${action.summary} ${scope('write')}`,
      requestParams: { path: idParam, header: resource.data ? idempotencyKey : ifMatch(action.ifMatch === 'required').extend(idempotencyKey.shape) },
      requestBody: { content: { 'application/json': { schema: action.schema } } },
      responses: { '200': json(action.revealSchema instanceof z.ZodObject ? item.extend(action.revealSchema.shape) : item, 'The resulting resource.'), ...errors },
    };
  }
  for (const [name, subList] of Object.entries(resource.subLists ?? {})) {
    at(`${one}/${name}`).get = {
      tags,
      operationId: `list${pascal(resource.object)}${pascal(name)}`,
      summary: `${subList.summary} ${scope('read')}`,
      requestParams: { path: idParam, query: listParams },
      responses: { '200': json(listEnvelope(subList.itemSchema.meta({ id: `${pascal(resource.object)}${pascal(name.replace(/s$/, ''))}` })), 'A page of them.'), ...errors },
    };
  }
  return paths;
}

export function buildOpenApiDocument(resources: readonly ResourceType[]) {
  const providerKind = z.object({
    id: z.enum(PROVIDER_KINDS),
    object: z.literal('provider_kind'),
    name: z.string(),
    default_base_url: z.string().nullable(),
    requires_base_url: z.boolean(),
    alternate_hosts: z.object({ allowed: z.boolean(), domains: z.array(z.string()).nullable() }),
    takes_model_map: z.boolean(),
  });
  const fixed: ZodOpenApiPathsObject = {
    '/organization': {
      get: {
        tags: ['organization'],
        operationId: 'getOrganization',
        summary: 'The calling token\'s organization. Scope `organization:read`.',
        responses: {
          '200': json(z.object({
            id: z.string(), object: z.literal('organization'), name: z.string(), plan: z.string(),
            entitlement_state: z.string(), environments: z.array(z.string()), created_at: z.number().int(),
          }), 'The organization.'),
          ...errors,
        },
      },
    },
    '/provider_kinds': {
      get: {
        tags: ['provider_connections'],
        operationId: 'listProviderKinds',
        summary: 'The provider kinds a connection can be of (also at /console/providers/kinds).',
        responses: { '200': json(listEnvelope(providerKind), 'Every kind, on one page.'), ...errors },
      },
    },
    '/webhook_deliveries': {
      get: {
        tags: ['webhook_endpoints'],
        operationId: 'listWebhookDeliveries',
        summary: `The delivery log: the organization's latest ${DELIVERY_LOG_SIZE} webhook deliveries, newest first, a page at a time. Scope \`webhooks:read\`.`,
        requestParams: { query: listParams },
        responses: { '200': json(deliveryListSchema, 'The latest deliveries.'), ...errors },
      },
    },
    '/openapi.json': {
      get: { tags: ['meta'], operationId: 'getOpenApiDocument', summary: 'This document.', responses: { '200': { description: 'OpenAPI 3.1.' } } },
    },
  };
  const overrides = resources.some((r) => r.type === 'end_user_cap_rules') ? endUserCapOverridePaths(errors) : {};
  const paths = Object.assign(fixed, ...resources.map(resourcePaths), overrides, usagePaths(errors), requestDataPaths(errors),
    budgetStatusPaths(errors), auditEventPaths(errors), exportPaths(errors, resources.filter((r) => !r.data)), manageJobPaths(errors), manageBatchPaths(errors), requestStatsPaths(errors)) as ZodOpenApiPathsObject;
  return createDocument({
    openapi: '3.1.0',
    info: {
      title: 'Model gateway management API',
      version: '1',
      description: 'Configure projects, keys, provider connections, routes, budgets, end-customer caps, prices and webhooks. PATCH and DELETE need If-Match; POST takes Idempotency-Key.',
    },
    servers: [{ url: '/manage/v1' }],
    security: [{ managementToken: [] }],
    components: { securitySchemes: { managementToken: { type: 'http', scheme: 'bearer', description: 'A management token (`gwm_...`).' } } },
    paths,
  });
}
