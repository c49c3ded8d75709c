/**
 * The closed set of errors the product answers with (spec section 7). Every failure becomes a
 * GatewayError naming one entry; one middleware renders it as `{error:{message,type,code}}`.
 */
type ErrorSpec = { readonly status: number; readonly type: string; readonly code: string | null };

const generic = (status: number, type: string): ErrorSpec => ({ status, type, code: null });
/** Entries whose wire `code` is the entry's own name. */
function coded<const K extends string>(status: number, type: string, codes: readonly K[]): Record<K, ErrorSpec> {
  return Object.fromEntries(codes.map((code): [K, ErrorSpec] => [code, { status, type, code }])) as unknown as Record<K, ErrorSpec>;
}

export const ERROR_CATALOG = {
  invalid_request: generic(400, 'invalid_request_error'),
  ...coded(400, 'invalid_request_error', [
    'invalid_json', 'unknown_provider', 'invalid_provider_selection', 'invalid_attribution',
    'unknown_fallback_model', 'ambiguous_model', 'end_user_id_required', 'cache_ttl_too_long',
    'invalid_cache_control', 'response_cache_unavailable', 'idempotency_key_reuse',
    'idempotency_key_in_progress', 'if_match_required', 'invalid_if_match', 'unknown_resource_type',
    'operation_not_supported', 'duplicate_connection_name', 'alternate_host_off_domain',
    'alternate_host_not_allowed', 'credential_rejected',
    // Tool-gateway configuration (spec 7, issue 15).
    'invalid_mcp_server_url', 'invalid_mcp_credential', 'mcp_discovery_failed', 'mcp_server_slug_taken',
    'mcp_tool_name_clash', 'mcp_tool_definition_stale', 'mcp_tool_removed', 'mcp_tool_not_approved',
    'mcp_trifecta_unconfirmed',
    // A kept Responses conversation's bounds (issue 52).
    'conversation_too_long', 'conversation_too_large',
  ]),
  authentication: generic(401, 'authentication_error'),
  ...coded(402, 'budget_exceeded', [
    'key_budget', 'key_lifetime_limit', 'project_budget', 'member_budget', 'organization_budget',
    'end_user_budget', 'unpriced_model_under_budget', 'subscription_required', 'trial_payment_failed',
  ]),
  /** Content moderation by the provider (spec 7: 403 permission_denied, no code given). */
  permission_denied: generic(403, 'permission_denied'),
  ...coded(403, 'permission_denied', [
    'model_not_allowed', 'route_not_allowed', 'project_archived', 'key_disabled', 'ip_not_allowed',
    'organization_suspended', 'guardrail_blocked', 'guardrail_unavailable', 'insufficient_scope',
    'insufficient_role', 'plan_feature', 'project_restricted', 'token_creator_not_admin', 'mcp_disabled',
  ]),
  ...coded(404, 'model_not_found', ['model_not_found']),
  not_found: generic(404, 'not_found'),
  ...coded(404, 'not_found', ['resource_not_found', 'decision_policy_not_found', 'mcp_server_not_found']),
  request_timeout: generic(408, 'request_timeout'),
  ...coded(408, 'request_timeout', ['stream_stalled', 'decision_deadline']),
  ...coded(409, 'conflict', ['version_conflict', 'project_has_usage', 'key_not_rotatable', 'environment_in_use']),
  request_too_large: generic(413, 'request_too_large'),
  rate_limit_exceeded: generic(429, 'rate_limit_exceeded'),
  ...coded(429, 'rate_limit_exceeded', ['provider_rate_limited', 'invalid_api_key_rate_limited', 'mcp_server_rate_limited']),
  internal_error: generic(500, 'internal_error'),
  upstream_error: generic(502, 'upstream_error'),
  no_available_provider: generic(503, 'no_available_provider'),
  /** One of our own services (Temporal, Postgres, Redis) is briefly unavailable: transient, no code (spec 7). */
  dependency_unavailable: generic(503, 'no_available_provider'),
  ...coded(503, 'no_available_provider', ['no_provider_connected', 'connection_out_of_scope', 'model_not_served']),
} as const satisfies Record<string, ErrorSpec>;

export type ErrorKind = keyof typeof ERROR_CATALOG;

export interface GatewayErrorOptions {
  /** Response headers that belong to this error, such as Retry-After or ETag. */
  headers?: Record<string, string>;
  /** Extra fields placed beside message/type/code in the error object (spec: e.g. end_user_budget). */
  details?: Record<string, unknown>;
  cause?: unknown;
}

export class GatewayError extends Error {
  readonly status: number;
  readonly type: string;
  readonly code: string | null;
  readonly headers: Record<string, string>;
  readonly details: Record<string, unknown>;

  constructor(
    readonly kind: ErrorKind,
    message: string,
    options: GatewayErrorOptions = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'GatewayError';
    const spec: ErrorSpec = ERROR_CATALOG[kind];
    this.status = spec.status;
    this.type = spec.type;
    this.code = spec.code;
    this.headers = options.headers ?? {};
    this.details = options.details ?? {};
  }

  toBody(): { error: { message: string; type: string; code: string | null } & Record<string, unknown> } {
    return { error: Object.assign({}, this.details, { message: this.message, type: this.type, code: this.code }) };
  }
}

export function isGatewayError(e: unknown): e is GatewayError {
  return e instanceof GatewayError;
}
