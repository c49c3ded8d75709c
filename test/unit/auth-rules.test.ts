import { canonicalCidr, addressAllowed, parseRanges } from '../../core/auth/ip-allowlist';
import { refuseKey, type KeyContext } from '../../core/auth/gateway-key-auth';
import { roleAtLeast, scopeGranted } from '../../core/auth/scopes';
import { authorize, requireAdminCreator, requirePlan, requireProjectAccess } from '../../api/middleware/management-auth';
import type { GatewayContext } from '../../api/context';
import type { ManagementPrincipal } from '../../core/auth/management-token-auth';
import { GatewayError } from '../../core/errors';

describe('scopes', () => {
  it('grants exact scopes, * everything, *:read every read and *:write every write', () => {
    expect(scopeGranted(['analytics:read'], 'analytics:read')).toBe(true);
    expect(scopeGranted(['analytics:read'], 'audit:read')).toBe(false);
    expect(scopeGranted(['*:read'], 'audit:read')).toBe(true);
    expect(scopeGranted(['*:read'], 'projects:write')).toBe(false);
    expect(scopeGranted(['*:write'], 'projects:write')).toBe(true);
    expect(scopeGranted(['*'], 'mcp:write')).toBe(true);
    expect(scopeGranted([], 'projects:read')).toBe(false);
  });

  it('orders roles owner > admin > member > viewer', () => {
    expect(roleAtLeast('owner', 'admin')).toBe(true);
    expect(roleAtLeast('member', 'admin')).toBe(false);
    expect(roleAtLeast('viewer', 'viewer')).toBe(true);
  });
});

function ctxFor(principal: Partial<ManagementPrincipal>): GatewayContext {
  const full: ManagementPrincipal = {
    tokenId: 'mtok_1', orgId: 'org_1', plan: 'business', scopes: ['*'], projectIds: null, memberId: 'mem_1', role: 'owner', ...principal,
  };
  return { state: { principal: full } } as unknown as GatewayContext;
}

function codeOf(fn: () => unknown): string | null | undefined {
  try {
    fn();
    return undefined;
  } catch (e) {
    return (e as GatewayError).code;
  }
}

describe('management authorization (spec 5.6)', () => {
  it('refuses a missing scope before looking at the role', () => {
    expect(codeOf(() => authorize(ctxFor({ scopes: ['audit:read'], role: 'viewer' }), 'projects:write'))).toBe('insufficient_scope');
  });

  it("needs at least the member role for writes, judged on the creator's current role", () => {
    expect(codeOf(() => authorize(ctxFor({ role: 'viewer' }), 'projects:write'))).toBe('insufficient_role');
    expect(codeOf(() => authorize(ctxFor({ role: 'viewer' }), 'projects:read'))).toBeUndefined();
    expect(codeOf(() => authorize(ctxFor({ role: 'member' }), 'projects:write'))).toBeUndefined();
    expect(codeOf(() => authorize(ctxFor({ role: 'member' }), 'projects:write', 'admin'))).toBe('insufficient_role');
  });

  it('gates plans, projects and admin-only actions with their own codes', () => {
    expect(codeOf(() => requirePlan(ctxFor({ plan: 'trial' }), 'team', 'x'))).toBe('plan_feature');
    expect(codeOf(() => requirePlan(ctxFor({ plan: 'business' }), 'team', 'x'))).toBeUndefined();
    expect(codeOf(() => requireProjectAccess(ctxFor({ projectIds: ['proj_a'] }), 'proj_b'))).toBe('project_restricted');
    expect(codeOf(() => requireProjectAccess(ctxFor({ projectIds: ['proj_a'] }), 'proj_a'))).toBeUndefined();
    expect(codeOf(() => requireProjectAccess(ctxFor({ projectIds: null }), 'proj_b'))).toBeUndefined();
    expect(codeOf(() => requireAdminCreator(ctxFor({ role: 'member' })))).toBe('token_creator_not_admin');
    expect(codeOf(() => requireAdminCreator(ctxFor({ role: 'admin' })))).toBeUndefined();
  });
});

describe('allowed_ips', () => {
  it('stores addresses canonically as ranges', () => {
    expect(canonicalCidr('1.2.3.4')).toBe('1.2.3.4/32');
    expect(canonicalCidr(' 10.1.2.3/8 ')).toBe('10.0.0.0/8');
    expect(canonicalCidr('2001:db8::1')).toBe('2001:db8::1/128');
    expect(() => canonicalCidr('not-an-ip')).toThrow();
  });

  it('matches IPv4 clients, including IPv4-mapped IPv6 ones, and accepts anything when empty', () => {
    const ranges = parseRanges(['192.0.2.0/24']);
    expect(addressAllowed(ranges, '192.0.2.55')).toBe(true);
    expect(addressAllowed(ranges, '::ffff:192.0.2.55')).toBe(true);
    expect(addressAllowed(ranges, '198.51.100.1')).toBe(false);
    expect(addressAllowed(ranges, 'garbage')).toBe(false);
    expect(addressAllowed([], '198.51.100.1')).toBe(true);
  });
});

describe('refuseKey', () => {
  const base: KeyContext = {
    keyId: 'key_1', orgId: 'org_1', projectId: 'proj_1', lineageId: 'key_1', label: 'k', rateLimitRpm: 200,
    environment: null, modelAllowlist: [], projectModelAllowlist: [], allowedRoutes: [], allowedProviders: [], observabilityAccess: 'none', creditLimit: null, creditPeriodSince: null, createdByMemberId: null, projectSpendLimit: null, disabled: false, revoked: false,
    expiresAt: null, projectArchived: false, entitlementState: 'active', supportEmail: null, allowedRanges: [],
  };
  const now = new Date('2026-01-01T00:00:00Z');

  it('accepts a usable key', () => {
    expect(refuseKey(base, now, '127.0.0.1')).toBeNull();
  });

  it('names dead keys 401 before any other refusal', () => {
    const dead = { ...base, revoked: true, disabled: true, projectArchived: true };
    expect(refuseKey(dead, now, '127.0.0.1')?.status).toBe(401);
    expect(refuseKey({ ...base, expiresAt: now }, now, '127.0.0.1')?.status).toBe(401);
    expect(refuseKey({ ...base, expiresAt: new Date(now.getTime() + 1000) }, now, '127.0.0.1')).toBeNull();
  });

  it('maps entitlement states to their codes', () => {
    expect(refuseKey({ ...base, entitlementState: 'trial_payment_failed' }, now, '1.1.1.1')?.code).toBe('trial_payment_failed');
    expect(refuseKey({ ...base, entitlementState: 'grace' }, now, '1.1.1.1')).toBeNull();
    expect(refuseKey({ ...base, entitlementState: 'trialing' }, now, '1.1.1.1')).toBeNull();
  });
});
