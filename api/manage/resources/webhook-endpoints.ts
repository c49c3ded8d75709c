import { and, eq, isNull } from 'drizzle-orm';
import { z } from 'zod';
import { newSecret } from '../../../core/crypto/secrets';
import { ENDPOINT_EVENT_TYPES, JOB_EVENT_TYPES, webhookEndpoints } from '../../../core/db/schema';
import { GatewayError } from '../../../core/errors';
import { newId } from '../../../core/ids';
import { checkServiceUrl } from '../../../core/net/service-url';
import { unixTime } from './fields';
import { newestFirst, selectOne, type ResourceCall, type ResourceType } from './resource-type';
import { unix } from './router';

type EndpointRow = typeof webhookEndpoints.$inferSelect;

export const WEBHOOK_SECRET_PREFIX = 'whsec_';
/** Spec 6.3 / 8: a rotated-out secret keeps signing for 24 hours. */
export const RETIRED_SECRET_SIGNS_FOR_MS = 24 * 60 * 60 * 1000;

const createSchema = z.strictObject({
  url: z.string().min(1).max(2048),
  description: z.string().max(200).optional(),
  events: z.array(z.enum(ENDPOINT_EVENT_TYPES)).min(1).max(ENDPOINT_EVENT_TYPES.length).optional(),
});

const secretReveal = z.object({ secret: z.string().describe('The signing secret (`whsec_...`), shown only in this answer.') });

function sealSecret(call: ResourceCall, orgId: string, id: string, secret: string): string {
  return call.services.sealer.seal(secret, { orgId, recordId: id, field: 'secret' });
}

/** Console webhook endpoints (spec 2.6, 6): created and deleted, never patched. */
export const webhookEndpointsResource: ResourceType<EndpointRow> = {
  type: 'webhook_endpoints',
  object: 'webhook_endpoint',
  scope: 'webhooks',
  table: webhookEndpoints,
  readSchema: z.object({
    url: z.string(),
    description: z.string().nullable(),
    events: z.array(z.enum(ENDPOINT_EVENT_TYPES)),
    secret_rotated_at: unixTime.nullable(),
    created_at: unixTime,
    updated_at: unixTime,
  }),
  createSchema,
  revealSchema: secretReveal,

  async find(db, orgId, id, { forUpdate }) {
    const query = db.select().from(webhookEndpoints)
      .where(and(eq(webhookEndpoints.orgId, orgId), eq(webhookEndpoints.id, id), isNull(webhookEndpoints.deletedAt)));
    return selectOne(query, forUpdate);
  },

  list(db, principal, page) {
    return newestFirst(db, webhookEndpoints, and(eq(webhookEndpoints.orgId, principal.orgId), isNull(webhookEndpoints.deletedAt)), page);
  },

  async create(call, input: z.infer<typeof createSchema>) {
    const verdict = checkServiceUrl(input.url, { allowPrivateNetwork: call.services.allowPrivateNetwork });
    if (!verdict.ok) throw new GatewayError('invalid_request', `Invalid \`url\`: it ${verdict.reason}.`);
    const id = newId('whep');
    const secret = newSecret(WEBHOOK_SECRET_PREFIX);
    const [row] = await call.db.insert(webhookEndpoints).values({
      id,
      orgId: call.principal.orgId,
      url: input.url,
      description: input.description ?? null,
      events: [...new Set(input.events ?? JOB_EVENT_TYPES)],
      secretSealed: sealSecret(call, call.principal.orgId, id, secret),
    }).returning();
    return { row: row!, reveal: { secret } };
  },

  async remove(call) {
    return { hide: { deletedAt: call.now } };
  },

  actions: {
    rotate_secret: {
      summary: 'A new signing secret, shown once; the previous one keeps signing for 24 hours.',
      schema: z.strictObject({}),
      ifMatch: 'optional',
      revealSchema: secretReveal,
      /**
       * The durable `secretRotation` workflow is told the retire time before the row is locked;
       * it reads the retired secrets from the row, so if this write then fails it finds nothing
       * new to drop.
       */
      async prepare(call, row) {
        const retireAt = new Date(call.now.getTime() + call.services.scaleMs(RETIRED_SECRET_SIGNS_FOR_MS)).toISOString();
        await call.services.scheduleSecretRetirement({ orgId: row.orgId, endpointId: row.id, retireAt });
        return retireAt;
      },
      /** The old secret moves to the retired list with its end time; the workflow drops it then. */
      async run(call, row, _input, retireAt: string) {
        const secret = newSecret(WEBHOOK_SECRET_PREFIX);
        return {
          changes: {
            secretSealed: sealSecret(call, row.orgId, row.id, secret),
            retiredSecrets: [{ sealed: row.secretSealed, expires_at: retireAt }, ...row.retiredSecrets],
            secretRotatedAt: call.now,
          },
          reveal: { secret },
          auditDetail: { previous_secret_signs_until: retireAt },
        };
      },
    },
  },

  present: (row) => ({
    url: row.url,
    description: row.description,
    events: row.events,
    secret_rotated_at: unix(row.secretRotatedAt),
    created_at: unix(row.createdAt),
    updated_at: unix(row.updatedAt),
  }),
};
