import Router from '@koa/router';
import type { Payload, PayloadCodec } from '@temporalio/common';
import { z } from 'zod';
import type { AuthFailureLimiter } from '../core/auth/auth-failure-limiter';
import { parseBearer } from '../core/auth/credentials';
import { lookupManagementToken, type ManagementPrincipal } from '../core/auth/management-token-auth';
import { roleAtLeast } from '../core/auth/scopes';
import type { Clock } from '../core/clock';
import type { Sealer } from '../core/crypto/sealing';
import { sha256Hex } from '../core/crypto/secrets';
import type { Database } from '../core/db/client';
import { GatewayError } from '../core/errors';
import type { GatewayContext, GatewayState } from './context';
import { jsonBody } from './middleware/body';
import { authFailure } from './middleware/auth-failures';
import { parseInput } from './validation';

/**
 * Temporal's codec server protocol (issue 34): `POST /temporal-codec/decode` and `/encode` take
 * `{"payloads": [{"metadata": {...base64}, "data": base64}]}` (Payloads in proto3 JSON) and
 * answer the same shape, run through the gateway's payload codec (core/crypto/payload-codec.ts).
 * The Temporal UI (Settings, Codec Server) and the CLI (`--codec-endpoint`) call it to show the
 * sealed payloads of workflows: every tenant's prompts, so only the operator may.
 *
 * Who may: a management token of the operator's organization (GW_OPERATOR_ORG_ID) whose creator
 * is an admin or owner, sent as `Authorization: Bearer` (the CLI's `--codec-auth`), or the
 * session cookie `POST /temporal-codec/session` sets for such a token, which the Temporal UI
 * sends when "Include cross-origin credentials" is on. The cookie holds the token's hash sealed
 * with the gateway's keys, and every call looks the token up again, so revoking it ends the
 * session. Cross-origin calls are allowed from the Temporal UI's origin (GW_TEMPORAL_UI_URL) only.
 */
export const CODEC_PATH = '/temporal-codec';
const SESSION_COOKIE = 'gw_temporal_codec';
/** A UI session lasts a working day; the token itself is checked on every call. */
const SESSION_MS = 8 * 3_600_000;
const SESSION_BINDING = { orgId: '', recordId: 'temporal-codec', field: 'session' };
const NOT_OPERATOR = 'Only an admin of the operator\'s organization may read workflow payloads.';

const base64 = z.string().max(8 * 1024 * 1024).regex(/^[A-Za-z0-9+/=_-]*$/, 'must be base64');
const payloadsSchema = z.object({
  payloads: z.array(z.object({ metadata: z.record(z.string(), base64).optional(), data: base64.optional() })).max(10_000),
});

type WirePayload = { metadata?: Record<string, string>; data?: string };
const fromWire = (p: WirePayload): Payload => ({
  metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64')])),
  data: Buffer.from(p.data ?? '', 'base64'),
});
const toWire = (p: Payload): WirePayload => ({
  metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v ?? new Uint8Array()).toString('base64')])),
  data: Buffer.from(p.data ?? new Uint8Array()).toString('base64'),
});

export type TemporalCodecDeps = {
  db: Database;
  clock: Clock;
  authFailures: AuthFailureLimiter;
  codec: PayloadCodec;
  /** Seals the session cookie. */
  sealer: Sealer;
  operatorOrgId: string | undefined;
  /** The Temporal UI's address (GW_TEMPORAL_UI_URL): its origin may call cross-origin. */
  temporalUiUrl: string | undefined;
};

export function temporalCodecRouter(deps: TemporalCodecDeps): Router<GatewayState> {
  const router = new Router<GatewayState>({ prefix: CODEC_PATH });
  const uiOrigin = deps.temporalUiUrl ? new URL(deps.temporalUiUrl).origin : null;

  /** The UI's origin (only) may call with credentials; anything else gets no CORS headers. */
  const cors = (ctx: GatewayContext): boolean => {
    ctx.vary('Origin');
    if (!uiOrigin || ctx.get('origin') !== uiOrigin) return false;
    ctx.set('Access-Control-Allow-Origin', uiOrigin);
    ctx.set('Access-Control-Allow-Credentials', 'true');
    return true;
  };

  async function principalOfToken(ctx: GatewayContext, secret: string): Promise<ManagementPrincipal> {
    const found = await lookupManagementToken(deps.db, sha256Hex(secret), deps.clock.now());
    if (found.status !== 'ok') throw await authFailure(ctx, deps.authFailures, 'manage', 'Missing or invalid management token.');
    return found.principal;
  }

  /** The operator's admin behind this call: by bearer token, else by the UI session cookie. */
  async function operator(ctx: GatewayContext): Promise<ManagementPrincipal> {
    if (!deps.operatorOrgId) throw new GatewayError('not_found', 'No operator organization is configured (GW_OPERATOR_ORG_ID), so no one may read workflow payloads.');
    const bearer = parseBearer(ctx.get('authorization') || undefined);
    let principal: ManagementPrincipal;
    if (bearer.kind === 'present') principal = await principalOfToken(ctx, bearer.secret);
    else {
      const session = ctx.cookies.get(SESSION_COOKIE);
      const hash = session ? openSession(session) : null;
      if (!hash) throw new GatewayError('authentication', 'Send an operator\'s management token as `Authorization: Bearer <token>`, or sign in at /temporal-codec/session.');
      const found = await lookupManagementToken(deps.db, hash, deps.clock.now());
      if (found.status !== 'ok') throw new GatewayError('authentication', 'The session\'s management token is no longer valid; sign in again.');
      principal = found.principal;
    }
    if (principal.orgId !== deps.operatorOrgId || !roleAtLeast(principal.role, 'admin')) throw new GatewayError('permission_denied', NOT_OPERATOR);
    return principal;
  }

  function openSession(value: string): string | null {
    try {
      const { hash, exp } = JSON.parse(deps.sealer.open(value, SESSION_BINDING)) as { hash: string; exp: number };
      return exp > deps.clock.now().getTime() ? hash : null;
    } catch {
      return null;
    }
  }

  router.options(['/decode', '/encode', '/session'], (ctx) => {
    if (cors(ctx)) {
      ctx.set('Access-Control-Allow-Methods', 'POST, OPTIONS');
      ctx.set('Access-Control-Allow-Headers', 'content-type, x-namespace, authorization');
      ctx.set('Access-Control-Max-Age', '600');
    }
    ctx.status = 204;
  });

  for (const direction of ['decode', 'encode'] as const) {
    router.post(`/${direction}`, jsonBody(), async (ctx) => {
      cors(ctx);
      await operator(ctx);
      const { payloads } = parseInput(payloadsSchema, ctx.state.body);
      let out: Payload[];
      try {
        out = await deps.codec[direction](payloads.map(fromWire));
      } catch {
        throw new GatewayError('invalid_request', `A payload could not be ${direction}d (sealed with a key this gateway does not hold, or altered).`);
      }
      ctx.set('Cache-Control', 'no-store');
      ctx.body = { payloads: out.map(toWire) };
    });
  }

  /** A UI session for an operator's token: the cookie the Temporal UI sends with credentials. */
  router.post('/session', async (ctx) => {
    cors(ctx);
    const bearer = parseBearer(ctx.get('authorization') || undefined);
    if (bearer.kind !== 'present') throw new GatewayError('authentication', 'Send an operator\'s management token as `Authorization: Bearer <token>`.');
    await operator(ctx);
    const exp = deps.clock.now().getTime() + SESSION_MS;
    const value = deps.sealer.seal(JSON.stringify({ hash: sha256Hex(bearer.secret), exp }), SESSION_BINDING);
    // Over https, SameSite=None: a Temporal UI on another site (temporal.ops.example calling
    // api.example) sends it with its fetches, which Lax forbids (issue 55). Browsers take None
    // only with Secure; over plain http (development on localhost, one site) it stays Lax. A
    // cross-site page can make the browser send it but cannot read the answer: CORS admits the
    // UI's origin only.
    ctx.cookies.set(SESSION_COOKIE, value, { httpOnly: true, sameSite: ctx.secure ? 'none' : 'lax', path: CODEC_PATH, maxAge: SESSION_MS, secure: ctx.secure, overwrite: true });
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { signed_in: true, expires_at: Math.floor(exp / 1000) };
  });

  /** A page to sign in from the browser the Temporal UI runs in (the token never goes in a URL). */
  router.get(['/', '/session'], (ctx) => {
    ctx.type = 'html';
    ctx.set('Cache-Control', 'no-store');
    ctx.body = `<!doctype html><meta charset="utf-8"><title>Temporal codec sign-in</title>
<p>Sign in with a management token of the operator's organization (an admin's) to read workflow payloads in the Temporal UI.</p>
<form id="f"><input id="t" type="password" size="60" placeholder="management token" autocomplete="off"> <button>Sign in</button></form><p id="r"></p>
<script>document.getElementById('f').onsubmit=async(e)=>{e.preventDefault();const r=await fetch('${CODEC_PATH}/session',{method:'POST',headers:{authorization:'Bearer '+document.getElementById('t').value}});const b=await r.json();document.getElementById('r').textContent=r.ok?'Signed in: the Temporal UI can now decode payloads (Settings, Codec Server: this address, with "Include cross-origin credentials").':b.error.message;};</script>`;
  });

  return router;
}
