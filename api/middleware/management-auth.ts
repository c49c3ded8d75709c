import type { Middleware } from 'koa';
import type { AuthFailureLimiter } from '../../core/auth/auth-failure-limiter';
import { GATEWAY_KEY_PREFIX, parseBearer } from '../../core/auth/credentials';
import { lookupManagementToken } from '../../core/auth/management-token-auth';
import { roleAtLeast, scopeGranted } from '../../core/auth/scopes';
import type { Clock } from '../../core/clock';
import { sha256Hex } from '../../core/crypto/secrets';
import type { Database } from '../../core/db/client';
import type { RedisHandle } from '../../core/redis';
import { countInWindow, retryAfterSeconds } from '../../core/ratelimit/fixed-window';
import type { MemberRole } from '../../core/db/schema';
import { GatewayError } from '../../core/errors';
import type { GatewayContext, GatewayState } from '../context';
import { authFailure } from './auth-failures';

/** Spec 5.7 / 8: each management token may make 120 requests a minute. */
export const MANAGEMENT_TOKEN_RPM = 120;

const UNAUTHENTICATED = 'Missing or invalid management token. Send it as `Authorization: Bearer <token>`.';

/** `/manage/v1` authentication: a management token, read fresh so revocation is immediate. */
export function managementAuth(deps: { db: Database; redis: RedisHandle; authFailures: AuthFailureLimiter; clock: Clock }): Middleware<GatewayState> {
  return async (ctx, next) => {
    const bearer = parseBearer(ctx.get('authorization') || undefined);
    if (bearer.kind === 'missing') throw new GatewayError('authentication', UNAUTHENTICATED);
    if (bearer.kind === 'present' && bearer.secret.startsWith(GATEWAY_KEY_PREFIX)) {
      throw new GatewayError('authentication', 'A gateway key cannot call the management API; use a management token.');
    }
    const found = bearer.kind === 'present'
      ? await lookupManagementToken(deps.db, sha256Hex(bearer.secret), deps.clock.now())
      : { status: 'unknown' as const };
    if (found.status !== 'ok') {
      const why = found.status === 'unknown' ? UNAUTHENTICATED : `This management token is ${found.status}.`;
      throw await authFailure(ctx, deps.authFailures, 'manage', why);
    }
    const window = await countInWindow(deps.redis.redis, `mtok-rpm:${found.principal.tokenId}`, 60_000);
    if (window.count > MANAGEMENT_TOKEN_RPM) {
      throw new GatewayError('rate_limit_exceeded', `A management token may make ${MANAGEMENT_TOKEN_RPM} requests a minute.`, {
        headers: { 'Retry-After': String(retryAfterSeconds(window)) },
      });
    }
    ctx.state.principal = found.principal;
    Object.assign(ctx.state.logFields, { token_id: found.principal.tokenId, org_id: found.principal.orgId });
    await next();
  };
}

/**
 * Checks a management request may do what it asks: the token's scope, then the creator's
 * current role. Writes need at least `member`; reads any role.
 */
export function authorize(ctx: GatewayContext, scope: string, minimumRole: MemberRole = scope.endsWith(':write') ? 'member' : 'viewer') {
  const principal = ctx.state.principal;
  if (!principal) throw new Error('authorize() used outside managementAuth');
  if (!scopeGranted(principal.scopes, scope)) {
    throw new GatewayError('insufficient_scope', `This token lacks the \`${scope}\` scope.`);
  }
  if (!roleAtLeast(principal.role, minimumRole)) {
    throw new GatewayError('insufficient_role', `The token's creator needs the ${minimumRole} role or higher.`);
  }
  return principal;
}

const PLAN_RANK = { trial: 0, team: 1, business: 2 } as const;

/** 403 plan_feature when the organization's plan is below what a feature needs. */
export function requirePlan(ctx: GatewayContext, minimum: keyof typeof PLAN_RANK, feature: string): void {
  const principal = ctx.state.principal!;
  if (PLAN_RANK[principal.plan] < PLAN_RANK[minimum]) {
    throw new GatewayError('plan_feature', `${feature} needs the ${minimum} plan or higher.`);
  }
}

/** 403 project_restricted when a project-restricted token reaches outside its projects. */
export function requireProjectAccess(ctx: GatewayContext, projectId: string): void {
  const allowed = ctx.state.principal!.projectIds;
  if (allowed && !allowed.includes(projectId)) {
    throw new GatewayError('project_restricted', 'This token is restricted to other projects.');
  }
}

/** 403 token_creator_not_admin for actions only an owner's or admin's token may take. */
export function requireAdminCreator(ctx: GatewayContext): void {
  if (!roleAtLeast(ctx.state.principal!.role, 'admin')) {
    throw new GatewayError('token_creator_not_admin', "This action needs a token whose creator is an owner or admin.");
  }
}
