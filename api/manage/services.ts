import type { Client } from '@temporalio/client';
import type { Dispatcher } from 'undici';
import type { Config } from '../../core/config';
import { UNSUBSCRIBE_KEY_PURPOSE } from '../../core/notifications/unsubscribe';
import { createSealer, deriveKeys, type Sealer, type SigningKeys } from '../../core/crypto/sealing';
import { checkProviderCredential, type CredentialCheck } from '../../core/providers/credential-check';
import type { ProviderKind } from '../../core/providers/kinds';
import { retireSecretSignal } from '../../workflows/secret-rotation';
import { searchAttributeKeys, taskQueue, workflowIds, type KeyRotationInput, type SecretRotationInput } from '../../workflows/definitions';
import { withTemporalDeadline } from '../temporal-client';

/**
 * What management resources reach beyond their own transaction: sealing, the schedule scale,
 * durable timers on Temporal and credential checks with providers. Built once per API process.
 */
export type ManagementServices = {
  sealer: Sealer;
  /** Signs and checks alert emails' one-click unsubscribe links (core/notifications/unsubscribe.ts). */
  unsubscribeKey: SigningKeys;
  allowPrivateNetwork: boolean;
  /** Real durations times GW_SCHEDULE_SCALE (1 in production). */
  scaleMs(ms: number): number;
  /** Starts `keyRotation`; a retry of a rotation that never committed replaces the orphan. */
  scheduleKeyRevocation(input: KeyRotationInput): Promise<void>;
  /** Signals the endpoint's `secretRotation` the new retire time, starting it if none runs. */
  scheduleSecretRetirement(input: SecretRotationInput): Promise<void>;
  checkCredential(kind: ProviderKind, baseUrl: string, secret: string): Promise<CredentialCheck>;
  /** The guarded dispatcher (core/net), for calls to customer-chosen addresses such as MCP servers. */
  outbound: Dispatcher;
  /**
   * A workflow's page in the Temporal UI, for the operator's own organization only
   * (GW_OPERATOR_ORG_ID) and when GW_TEMPORAL_UI_URL is set: the UI's address and namespace
   * are the operator's infrastructure, not a tenant's to see.
   */
  workflowUrl(orgId: string, workflowId: string): string | null;
  /**
   * A request's trace in the operator's tracing UI (GW_TRACE_URL_TEMPLATE, `{trace_id}` replaced),
   * on the same terms as `workflowUrl`: the operator's own organization only.
   */
  traceUrl(orgId: string, traceId: string | null): string | null;
};

type ServiceConfig = Pick<Config, 'GW_SEALING_KEYS' | 'GW_ALLOW_PRIVATE_NETWORK' | 'GW_SCHEDULE_SCALE' | 'GW_TASK_QUEUE_PREFIX'> & Partial<Pick<Config, 'GW_TEMPORAL_UI_URL' | 'TEMPORAL_NAMESPACE' | 'GW_OPERATOR_ORG_ID' | 'GW_TRACE_URL_TEMPLATE'>>;

/** `outbound` is the guarded dispatcher (core/net) the API process built once from config. */
export function createManagementServices(config: ServiceConfig & { GW_SEALING_KEYS: string }, temporal: Client, outbound: Dispatcher): ManagementServices {
  const maintenanceQueue = taskQueue('maintenance', config.GW_TASK_QUEUE_PREFIX);
  return {
    sealer: createSealer(config.GW_SEALING_KEYS),
    unsubscribeKey: deriveKeys(config.GW_SEALING_KEYS, UNSUBSCRIBE_KEY_PURPOSE),
    allowPrivateNetwork: config.GW_ALLOW_PRIVATE_NETWORK,
    scaleMs: (ms) => Math.round(ms * config.GW_SCHEDULE_SCALE),
    workflowUrl: (orgId, workflowId) => (config.GW_TEMPORAL_UI_URL && config.GW_OPERATOR_ORG_ID && orgId === config.GW_OPERATOR_ORG_ID
      ? `${config.GW_TEMPORAL_UI_URL.replace(/\/+$/, '')}/namespaces/${encodeURIComponent(config.TEMPORAL_NAMESPACE ?? 'default')}/workflows/${encodeURIComponent(workflowId)}`
      : null),
    traceUrl: (orgId, traceId) => (config.GW_TRACE_URL_TEMPLATE && traceId && config.GW_OPERATOR_ORG_ID && orgId === config.GW_OPERATOR_ORG_ID
      ? config.GW_TRACE_URL_TEMPLATE.replaceAll('{trace_id}', encodeURIComponent(traceId))
      : null),
    async scheduleKeyRevocation(input) {
      await withTemporalDeadline(temporal, () => temporal.workflow.start('keyRotation', {
        workflowId: workflowIds.keyRotation(input.oldKeyId),
        taskQueue: maintenanceQueue,
        args: [input],
        workflowIdConflictPolicy: 'TERMINATE_EXISTING',
        typedSearchAttributes: [
          { key: searchAttributeKeys.orgId, value: input.orgId },
          { key: searchAttributeKeys.keyId, value: input.oldKeyId },
        ],
      }));
    },
    async scheduleSecretRetirement(input) {
      // Signal-with-start: a running workflow gets the new retire time as a signal, which it
      // cannot miss even while it is completing; an ended one is started anew.
      await withTemporalDeadline(temporal, () => temporal.workflow.signalWithStart('secretRotation', {
        workflowId: workflowIds.secretRotation(input.endpointId),
        taskQueue: maintenanceQueue,
        args: [input],
        signal: retireSecretSignal,
        signalArgs: [{ retireAt: input.retireAt }],
        typedSearchAttributes: [{ key: searchAttributeKeys.orgId, value: input.orgId }],
      }));
    },
    checkCredential: (kind, baseUrl, secret) => checkProviderCredential(outbound, kind, baseUrl, secret),
    outbound,
  };
}
