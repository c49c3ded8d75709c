import { createHmac } from 'node:crypto';
import Stripe from 'stripe';
import { signatureHeader, verifyWebhook, WebhookVerificationError } from '../../core/webhooks/signature';

/** A client nobody here wrote: Stripe's verifier uses the same construction (spec 6.3). */
const stripe = new Stripe('sk_test_unused');
const secret = 'whsec_current';
const retired = 'whsec_retired';
const payload = JSON.stringify({ id: 'evt_1', type: 'job.succeeded', created_at: 1_790_000_000, data: { id: 'job_1', object: 'job' } });
const now = new Date('2026-11-22T10:00:00Z');
const t = Math.floor(now.getTime() / 1000);

describe('delivery signatures (spec 6.3)', () => {
  it('is t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>" keyed with the whole whsec_ secret>', () => {
    const expected = createHmac('sha256', secret).update(`${t}.${payload}`).digest('hex');
    expect(signatureHeader(payload, [secret], t)).toBe(`t=${t},v1=${expected}`);
  });

  it('carries one v1 per signing secret, current first, and each verifies', () => {
    const header = signatureHeader(payload, [secret, retired], t);
    expect(header.split(',').map((p) => p.split('=')[0])).toEqual(['t', 'v1', 'v1']);
    for (const s of [secret, retired]) {
      expect(verifyWebhook(payload, header, s, { now })).toMatchObject({ id: 'evt_1' });
      expect(stripe.webhooks.constructEvent(payload, header, s, 300, undefined, t)).toMatchObject({ id: 'evt_1' });
    }
  });

  it('is accepted by the stripe package\'s constructEvent', () => {
    const fresh = Math.floor(Date.now() / 1000);
    expect(stripe.webhooks.constructEvent(payload, signatureHeader(payload, [secret], fresh), secret)).toMatchObject({ type: 'job.succeeded' });
  });

  it('refuses a tampered body, another secret, an old timestamp and malformed headers', () => {
    const header = signatureHeader(payload, [secret], t);
    const refuses = (body: string, h: string | undefined, s = secret, at = now) => expect(() => verifyWebhook(body, h, s, { now: at })).toThrow(WebhookVerificationError);
    refuses(payload.replace('job_1', 'job_2'), header);
    refuses(payload, header, 'whsec_other');
    refuses(payload, header, secret, new Date(now.getTime() + 301_000));
    expect(verifyWebhook(payload, header, secret, { now: new Date(now.getTime() + 299_000) })).toBeDefined();
    refuses(payload, undefined);
    refuses(payload, '');
    refuses(payload, `v1=${'0'.repeat(64)}`);
    refuses(payload, `t=${t}`);
    refuses(payload, `t=abc,v1=${'0'.repeat(64)}`);
    refuses(payload, `t=${t},v1`);
    refuses(payload, `t=${t},v1=${'0'.repeat(63)}`);
    refuses(payload, header.toUpperCase());
  });

  it('hashes the raw bytes: a re-serialized body does not verify', () => {
    const header = signatureHeader(payload, [secret], t);
    const reformatted = JSON.stringify(JSON.parse(payload), null, 2);
    expect(() => verifyWebhook(reformatted, header, secret, { now })).toThrow(WebhookVerificationError);
    expect(verifyWebhook(Buffer.from(payload), header, secret, { now })).toMatchObject({ id: 'evt_1' });
  });
});
