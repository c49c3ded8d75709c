import { and, eq } from 'drizzle-orm';
import { auditEvents, findings, notificationChannels } from '../../core/db/schema';
import type { Detection } from '../../core/findings/detection';
import { recordDetection } from '../../core/findings/store';
import { createProject } from '../../core/tenancy/gateway-keys';
import { issueManagementToken } from '../../core/tenancy/management-tokens';
import { manageClient, startManagementFixture, type ManagementFixture } from '../helpers/manage-client';
import { expectShape } from '../helpers/resource-shapes';
import { createTenant } from '../helpers/tenants';

type Resource = { id: string; object: string; version: number; [field: string]: unknown };
type Page = { object: string; data: Resource[] };

const CHATAPP_URL = 'https://hooks.chat.example.com/services/T000/B000/very-secret-path';

/**
 * Issue 22, section 1 and 2: notification channels and rules through the resource framework
 * with their own refusals, and findings read and acknowledged. Run with private networks
 * refused, as production runs.
 */
describe('alert channels, rules and findings (management API)', () => {
  let f: ManagementFixture;

  beforeAll(async () => {
    f = await startManagementFixture({ env: { GW_ALLOW_PRIVATE_NETWORK: 'false' } });
  });
  afterAll(() => f.close());

  describe('notification channels', () => {
    it('seals a chatapp address: never returned, never in the audit, only its host shown', async () => {
      const created = await f.client.post<Resource>('/notification_channels', { kind: 'chatapp', label: 'ops room', chatapp_url: CHATAPP_URL });
      expect(created.status).toBe(201);
      expectShape('notification_channels', created.body);
      expect(created.body).toMatchObject({ kind: 'chatapp', label: 'ops room', status: 'active', chatapp_host: 'hooks.chat.example.com', emails: null, webhook_endpoint_id: null });
      expect(JSON.stringify(created.body)).not.toContain('very-secret-path');
      const read = await f.client.get<Resource>(`/notification_channels/${created.body.id}`);
      expect(JSON.stringify(read.body)).not.toContain('very-secret-path');

      const [row] = await f.database.db.select().from(notificationChannels).where(eq(notificationChannels.id, created.body.id));
      expect(row!.chatappUrlSealed).toBeTruthy();
      expect(row!.chatappUrlSealed).not.toContain('very-secret-path');

      const patched = await f.client.patch<Resource>(`/notification_channels/${created.body.id}`, { chatapp_url: 'https://other.chat.example.org/hook/another-secret' }, '"1"');
      expect(patched.status).toBe(200);
      expect(patched.body.chatapp_host).toBe('other.chat.example.org');
      // In the order written (a select without ORDER BY has none).
      const audit = await f.database.db.select().from(auditEvents).where(eq(auditEvents.resourceId, created.body.id)).orderBy(auditEvents.createdAt, auditEvents.id);
      expect(audit.map((a) => a.action)).toEqual(['notification_channels.create', 'notification_channels.update']);
      expect(JSON.stringify(audit)).not.toContain('secret');
    });

    it('refuses a private, plain-HTTP or malformed chatapp address (400, nothing written)', async () => {
      for (const url of ['https://10.0.0.8/hook', 'https://localhost/hook', 'http://hooks.chat.example.com/x', 'not a url']) {
        const res = await f.client.post('/notification_channels', { kind: 'chatapp', label: 'room', chatapp_url: url });
        expect([res.status, res.body.error?.type]).toEqual([400, 'invalid_request_error']);
        expect(res.body.error?.message).toContain('chatapp_url');
      }
      const list = await f.client.get<Page>('/notification_channels');
      expect(list.body.data.filter((c) => c.label === 'room')).toHaveLength(0);
    });

    it('takes 1 to 20 valid email addresses and refuses anything else', async () => {
      const ok = await f.client.post<Resource>('/notification_channels', { kind: 'email', label: 'mail', emails: ['a@example.com', 'b@example.org'] });
      expect([ok.status, ok.body.emails]).toEqual([201, ['a@example.com', 'b@example.org']]);
      for (const emails of [[], ['not-an-address'], ['a@example.com', 'a b@example.com'], Array.from({ length: 21 }, (_, i) => `x${i}@example.com`)]) {
        const res = await f.client.post('/notification_channels', { kind: 'email', label: 'mail', emails });
        expect(res.status).toBe(400);
        expect(res.body.error?.message).toContain('emails');
      }
      const wrongKind = await f.client.patch(`/notification_channels/${ok.body.id}`, { chatapp_url: CHATAPP_URL }, '"1"');
      expect([wrongKind.status, wrongKind.body.error?.message]).toEqual([400, expect.stringContaining('chatapp_url')]);
    });

    it('attaches a webhook endpoint of the organization only (unknown or another one\'s: 400)', async () => {
      const endpoint = await f.client.post<Resource>('/webhook_endpoints', { url: 'https://hooks.example.com/alerts' });
      const ok = await f.client.post<Resource>('/notification_channels', { kind: 'webhook', label: 'hook', webhook_endpoint_id: endpoint.body.id });
      expect([ok.status, ok.body.webhook_endpoint_id]).toEqual([201, endpoint.body.id]);

      const unknown = await f.client.post('/notification_channels', { kind: 'webhook', label: 'hook', webhook_endpoint_id: 'whep_nope' });
      expect([unknown.status, unknown.body.error?.message]).toEqual([400, expect.stringContaining('webhook_endpoint_id')]);
      const other = await createTenant(f.database.db);
      const stranger = manageClient(f.api.url, other.token);
      const theirs = await stranger.post('/notification_channels', { kind: 'webhook', label: 'hook', webhook_endpoint_id: endpoint.body.id });
      expect(theirs.status).toBe(400);
    });
  });

  describe('notification rules', () => {
    let channelId: string;
    beforeAll(async () => {
      channelId = (await f.client.post<Resource>('/notification_channels', { kind: 'email', label: 'rules', emails: ['r@example.com'] })).body.id;
    });

    it('refuses an unknown channel, a half-given scope and a scope outside the organization', async () => {
      const base = { event_type: 'spend.anomaly', channel_id: channelId };
      const unknownChannel = await f.client.post('/notification_rules', { ...base, channel_id: 'nch_nope' });
      expect([unknownChannel.status, unknownChannel.body.error?.message]).toEqual([400, expect.stringContaining('channel_id')]);
      const half = await f.client.post('/notification_rules', { ...base, scope_kind: 'project' });
      expect([half.status, half.body.error?.message]).toEqual([400, expect.stringContaining('scope_id')]);
      const other = await createTenant(f.database.db);
      const foreign = await f.client.post('/notification_rules', { ...base, scope_kind: 'project', scope_id: other.projectId });
      expect([foreign.status, foreign.body.error?.message]).toEqual([400, expect.stringContaining('scope_id')]);
      const badType = await f.client.post('/notification_rules', { ...base, event_type: 'job.succeeded' });
      expect([badType.status, badType.body.error?.message]).toEqual([400, expect.stringContaining('event_type')]);

      const scoped = await f.client.post<Resource>('/notification_rules', { ...base, scope_kind: 'project', scope_id: f.tenant.projectId });
      expect(scoped.status).toBe(201);
      expect(scoped.body).toMatchObject({ scope_kind: 'project', scope_id: f.tenant.projectId, min_severity: 'info', include_end_user: false, mute_days: null, muted_until: null });
      const model = await f.client.post<Resource>('/notification_rules', { ...base, scope_kind: 'model', scope_id: 'gpt-4o-mini' });
      expect(model.status).toBe(201);
    });

    it('mutes for 1, 7 or 30 days (reads show muted_until) and unmutes with null', async () => {
      const rule = await f.client.post<Resource>('/notification_rules', { event_type: 'connection.failing', channel_id: channelId });
      const before = Math.floor(Date.now() / 1000);
      const muted = await f.client.patch<Resource>(`/notification_rules/${rule.body.id}`, { mute_days: 7 }, '"1"');
      expect(muted.status).toBe(200);
      expect(muted.body.mute_days).toBe(7);
      expect(muted.body.muted_until as number).toBeGreaterThanOrEqual(before + 7 * 86_400 - 5);
      expect(muted.body.muted_until as number).toBeLessThanOrEqual(before + 7 * 86_400 + 60);
      const unmuted = await f.client.patch<Resource>(`/notification_rules/${rule.body.id}`, { mute_days: null }, '"2"');
      expect(unmuted.body).toMatchObject({ mute_days: null, muted_until: null });
      const odd = await f.client.patch(`/notification_rules/${rule.body.id}`, { mute_days: 2 }, '"3"');
      expect([odd.status, odd.body.error?.message]).toEqual([400, expect.stringContaining('mute_days')]);
    });

    it('goes with its channel when the channel is deleted', async () => {
      const channel = await f.client.post<Resource>('/notification_channels', { kind: 'email', label: 'short-lived', emails: ['s@example.com'] });
      const rule = await f.client.post<Resource>('/notification_rules', { event_type: 'cost.drift', channel_id: channel.body.id });
      expect((await f.client.delete(`/notification_channels/${channel.body.id}`, '"1"')).status).toBe(200);
      expect((await f.client.get(`/notification_rules/${rule.body.id}`)).status).toBe(404);
    });
  });

  describe('findings', () => {
    const now = new Date();
    const detection = (orgId: string, over: Partial<Detection> = {}): Detection => ({
      orgId,
      type: 'spend.anomaly',
      severity: 'warning',
      title: 'Spend spike',
      summary: 'Project spent $42.00 in an hour against a usual $3.10.',
      scope: { kind: 'project', id: 'proj_x' },
      subject: {},
      window: { from: new Date(now.getTime() - 3_600_000), to: now },
      observed: 42,
      expected: 3.1,
      threshold: 6,
      evidence: { z: 12.5, requests: 300 },
      ...over,
    });

    it('lists newest first with status, type and severity filters, and reads one in its declared shape', async () => {
      const a = await recordDetection(f.database.db, detection(f.tenant.orgId, { scope: { kind: 'project', id: 'proj_list_a' } }), now);
      const b = await recordDetection(f.database.db, detection(f.tenant.orgId, { type: 'connection.failing', severity: 'critical', scope: { kind: 'connection', id: 'conn_b' } }), new Date(now.getTime() + 1000));
      const all = await f.client.get<Page>('/findings');
      expect(all.status).toBe(200);
      const ids = all.body.data.map((x) => x.id);
      expect(ids.indexOf(b.finding.id)).toBeLessThan(ids.indexOf(a.finding.id));
      for (const item of all.body.data) expectShape('findings', item);

      const critical = await f.client.get<Page>('/findings?severity=critical');
      expect(critical.body.data.map((x) => x.id)).toContain(b.finding.id);
      expect(critical.body.data.map((x) => x.id)).not.toContain(a.finding.id);
      const anomalies = await f.client.get<Page>('/findings?type=spend.anomaly&status=open');
      expect(anomalies.body.data.map((x) => x.id)).toContain(a.finding.id);
      expect(anomalies.body.data.every((x) => x.type === 'spend.anomaly' && x.status === 'open')).toBe(true);
      const bad = await f.client.get('/findings?status=closed');
      expect([bad.status, bad.body.error?.message]).toEqual([400, expect.stringContaining('status')]);

      const one = await f.client.get<Resource>(`/findings/${a.finding.id}`);
      expect([one.status, one.etag, one.body.version, one.body.managed_by]).toEqual([200, null, undefined, undefined]);
      expectShape('findings', one.body);
      expect(one.body).toMatchObject({
        object: 'finding', type: 'spend.anomaly', severity: 'warning', status: 'open', scope: { kind: 'project', id: 'proj_list_a' },
        observed: 42, expected: 3.1, threshold: 6, evidence: { z: 12.5, requests: 300 }, occurrences: 1, acknowledged_at: null, acknowledged_by: null,
      });
      expect(one.body.id).toMatch(/^fnd_/);
    });

    it('acknowledges with findings:write only, records who and when, audits it, and stays live', async () => {
      const { finding } = await recordDetection(f.database.db, detection(f.tenant.orgId, { scope: { kind: 'project', id: 'proj_ack' } }), now);
      const reader = await issueManagementToken(f.database.db, { orgId: f.tenant.orgId, name: 'reader', scopes: ['findings:read'], createdByMemberId: f.tenant.memberId });
      const allReader = await issueManagementToken(f.database.db, { orgId: f.tenant.orgId, name: 'all reader', scopes: ['*:read'], createdByMemberId: f.tenant.memberId });
      const writer = await issueManagementToken(f.database.db, { orgId: f.tenant.orgId, name: 'writer', scopes: ['findings:write', 'findings:read'], createdByMemberId: f.tenant.memberId });
      const outsider = await issueManagementToken(f.database.db, { orgId: f.tenant.orgId, name: 'outsider', scopes: ['alerts:read'], createdByMemberId: f.tenant.memberId });

      expect((await manageClient(f.api.url, allReader.token).get(`/findings/${finding.id}`)).status).toBe(200);
      expect((await manageClient(f.api.url, outsider.token).get('/findings')).status).toBe(403);
      const refused = await manageClient(f.api.url, reader.token).post(`/findings/${finding.id}/acknowledge`, {});
      expect([refused.status, refused.body.error?.code]).toEqual([403, 'insufficient_scope']);

      const acked = await manageClient(f.api.url, writer.token).post<Resource>(`/findings/${finding.id}/acknowledge`, {});
      expect(acked.status).toBe(200);
      expect(acked.body).toMatchObject({ status: 'acknowledged', acknowledged_by: writer.id });
      // A data operation, not a resource (spec 4.4): no version, no ETag.
      expect(acked.body.version).toBeUndefined();
      expect(acked.etag).toBeNull();
      expect(acked.body.acknowledged_at).toEqual(expect.any(Number));
      const audit = await f.database.db.select().from(auditEvents).where(and(eq(auditEvents.orgId, f.tenant.orgId), eq(auditEvents.resourceId, finding.id)));
      expect(audit.map((x) => [x.action, x.actorTokenId])).toEqual([['findings.acknowledge', writer.id]]);

      // Seen again while acknowledged: the same finding, updated, not a new one.
      const again = await recordDetection(f.database.db, detection(f.tenant.orgId, { scope: { kind: 'project', id: 'proj_ack' }, severity: 'critical' }), new Date(now.getTime() + 60_000));
      expect(again).toMatchObject({ change: 'raised', finding: { id: finding.id, status: 'acknowledged', severity: 'critical', occurrences: 2 } });
    });

    it('keeps one organization\'s findings invisible to another (404, not listed, not acknowledged)', async () => {
      const { finding } = await recordDetection(f.database.db, detection(f.tenant.orgId, { scope: { kind: 'project', id: 'proj_private' } }), now);
      const other = await createTenant(f.database.db);
      const stranger = manageClient(f.api.url, other.token);
      for (const res of [await stranger.get(`/findings/${finding.id}`), await stranger.post(`/findings/${finding.id}/acknowledge`, {})]) {
        expect([res.status, res.body.error?.code]).toEqual([404, 'resource_not_found']);
      }
      expect((await stranger.get<Page>('/findings')).body.data.some((x) => x.id === finding.id)).toBe(false);
      const [row] = await f.database.db.select().from(findings).where(eq(findings.id, finding.id));
      expect(row!.acknowledgedAt).toBeNull();
    });

    it('shows a project-restricted token its projects\' findings and the organization-wide ones; it acknowledges only its own', async () => {
      const other = await createProject(f.database.db, { orgId: f.tenant.orgId, name: `other-${Date.now()}` });
      const mine = await recordDetection(f.database.db, detection(f.tenant.orgId, { scope: { kind: 'project', id: f.tenant.projectId } }), now);
      const keyOfMine = await recordDetection(f.database.db, detection(f.tenant.orgId, { scope: { kind: 'key', id: f.tenant.key.id }, evidence: { project_id: f.tenant.projectId } }), now);
      const theirs = await recordDetection(f.database.db, detection(f.tenant.orgId, { scope: { kind: 'project', id: other } }), now);
      const orgWide = await recordDetection(f.database.db, detection(f.tenant.orgId, { scope: { kind: 'organization', id: f.tenant.orgId } }), now);
      const restricted = await issueManagementToken(f.database.db, {
        orgId: f.tenant.orgId, name: 'project reader', scopes: ['findings:read', 'findings:write'], createdByMemberId: f.tenant.memberId, projectIds: [f.tenant.projectId],
      });
      const client = manageClient(f.api.url, restricted.token);
      const listed = (await client.get<Page>('/findings?limit=100')).body.data.map((x) => x.id);
      expect(listed).toEqual(expect.arrayContaining([mine.finding.id, keyOfMine.finding.id, orgWide.finding.id]));
      expect(listed).not.toContain(theirs.finding.id);
      expect((await client.get(`/findings/${theirs.finding.id}`)).status).toBe(404);
      expect((await client.post(`/findings/${keyOfMine.finding.id}/acknowledge`, {})).status).toBe(200);
      const orgAck = await client.post(`/findings/${orgWide.finding.id}/acknowledge`, {});
      expect([orgAck.status, orgAck.body.error?.code]).toEqual([403, 'project_restricted']);
    });

    it('is read-only: no create, patch or delete', async () => {
      const { finding } = await recordDetection(f.database.db, detection(f.tenant.orgId, { scope: { kind: 'project', id: 'proj_ro' } }), now);
      for (const res of [
        await f.client.post('/findings', { type: 'spend.anomaly' }),
        await f.client.patch(`/findings/${finding.id}`, { status: 'resolved' }, '"1"'),
        await f.client.delete(`/findings/${finding.id}`, '"1"'),
      ]) expect([res.status, res.body.error?.code]).toEqual([400, 'operation_not_supported']);
    });
  });
});
