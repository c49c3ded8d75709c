import type { MemberRole } from '../db/schema';

/**
 * Scopes are `<area>:<read|write>`. `*` holds everything; `*:read` covers every read scope
 * (spec 5.5) and `*:write` every write scope.
 */
export function scopeGranted(granted: readonly string[], required: string): boolean {
  if (granted.includes('*') || granted.includes(required)) return true;
  const action = required.split(':')[1];
  return action !== undefined && granted.includes(`*:${action}`);
}

const ROLE_RANK: Record<MemberRole, number> = { viewer: 0, member: 1, admin: 2, owner: 3 };

export function roleAtLeast(role: MemberRole, minimum: MemberRole): boolean {
  return ROLE_RANK[role] >= ROLE_RANK[minimum];
}
