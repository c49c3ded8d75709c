import { eq } from 'drizzle-orm';
import type { DatabaseHandle } from '../../core/db/client';
import { projects, type GuardrailPolicy } from '../../core/db/schema';
import { scan } from '../../core/guardrails/engine';
import { createGuardrailPolicies } from '../../core/guardrails/policy-cache';
import { testDatabase } from '../helpers/harness';
import { createTenant } from '../helpers/tenants';

/**
 * The policy cache with the built-in detectors, which it loads itself when it first compiles a
 * policy rather than at start (the guardrails API test injects a registry of its own).
 */
describe('guardrail policy cache with the built-in detectors', () => {
  let database: DatabaseHandle;

  beforeAll(() => {
    database = testDatabase();
  });
  afterAll(async () => {
    await database?.close();
  });

  it('answers no rules for an organization without a policy', async () => {
    const t = await createTenant(database.db);
    const policies = createGuardrailPolicies(database.db);
    expect(await policies.rulesFor({ orgId: t.orgId, projectId: t.projectId, keyId: t.key.id })).toBeNull();
  });

  it('compiles a policy with the detectors it loads and finds what they detect', async () => {
    const t = await createTenant(database.db);
    const policy: GuardrailPolicy = {
      enabled: true,
      on_engine_error: 'block',
      rules: [
        { detector: 'phone', stage: 'input', action: 'flag' },
        { detector: 'iban', stage: 'input', action: 'flag' },
        { detector: 'credit_card', stage: 'input', action: 'flag' },
        { detector: 'keywords', stage: 'input', action: 'flag', words: ['project falcon'] },
        { detector: 'regex', stage: 'input', action: 'flag', patterns: ['ORD-\\d{6}'] },
      ],
    };
    await database.db.update(projects).set({ guardrailPolicy: policy }).where(eq(projects.id, t.projectId));

    const rules = await createGuardrailPolicies(database.db).rulesFor({ orgId: t.orgId, projectId: t.projectId, keyId: t.key.id });
    const text = 'Call +1 (213) 373-4253, pay DE89 3704 0044 0532 0130 00 by 4111 1111 1111 1111 for Project Falcon, order ORD-123456.';
    const result = await scan(rules!.input, [text], 'input');
    expect([result.unavailable, result.skipped]).toEqual([null, []]);
    expect(result.findings.map((f) => [f.detector, f.count]).sort()).toEqual([['credit_card', 1], ['iban', 1], ['keywords', 1], ['phone', 1], ['regex', 1]]);
  });

  it('says which stored policy is past the pattern bounds (written before them), naming no pattern, and fails its regex rules', async () => {
    const t = await createTenant(database.db);
    // Stored directly, as a policy written before the bounds was: about 98,000 RE2 instructions.
    const huge = `${'\\w{0,1000}'.repeat(49)}\\s\\d\\s`;
    const policy: GuardrailPolicy = { enabled: true, on_engine_error: 'block', rules: [{ detector: 'regex', stage: 'input', action: 'block', patterns: [huge] }] };
    await database.db.update(projects).set({ guardrailPolicy: policy }).where(eq(projects.id, t.projectId));
    const told: Array<{ orgId: string; policy: string; reason: string }> = [];
    const rules = await createGuardrailPolicies(database.db, { pastBounds: (past) => told.push(past) }).rulesFor({ orgId: t.orgId, projectId: t.projectId, keyId: t.key.id });
    expect(told).toEqual([{ orgId: t.orgId, policy: `project:${t.projectId}`, reason: expect.stringContaining('`rules.0.patterns.0`') }]);
    expect(told[0]!.reason).not.toContain('\\w{0,1000}');
    expect((await scan(rules!.input, ['hello'], 'input')).unavailable).toBe('regex');
  });
});
