import { randomBytes } from 'node:crypto';
import { createSealer, deriveKeys } from '../../core/crypto/sealing';
import { createLinkSigner } from '../../core/jobs/output-links';
import { readUnsubscribeToken, unsubscribeToken } from '../../core/notifications/unsubscribe';

const key = () => randomBytes(32).toString('base64');

/**
 * A sealing key rotated the way docs/operations.md says, across a rolling deploy (issue 55):
 * first the new key is added after the current one (it opens, it does not seal), then it is put
 * first. At each step a process on the previous keyring and one on the next work side by side:
 * each opens what the other sealed, and each checks the links the other signed. In one step,
 * the old processes could not open what the new ones sealed.
 */
describe('sealing key rotation in two steps', () => {
  const [k1, k2] = [key(), key()];
  const before = `1:${k1}`;
  const added = `1:${k1},2:${k2}`;
  const promoted = `2:${k2},1:${k1}`;
  const binding = { orgId: 'org_1', recordId: 'conn_1', field: 'api_key' };
  const address = { orgId: 'org_1', channelId: 'nch_1', email: 'ops@example.com' };
  const expires = new Date(Date.now() + 3_600_000);

  it.each([[before, added], [added, promoted]])('%s and %s work side by side', (older, newer) => {
    for (const [a, b] of [[older, newer], [newer, older]] as const) {
      expect(createSealer(b).open(createSealer(a).seal('secret', binding), binding)).toBe('secret');
      const url = new URL(createLinkSigner(deriveKeys(a, 'output-links')).url('https://gw.test', 'job_1', expires));
      expect(createLinkSigner(deriveKeys(b, 'output-links')).verify('job_1', url.searchParams.get('exp')!, url.searchParams.get('sig')!, new Date())).toBe(true);
      expect(readUnsubscribeToken(deriveKeys(b, 'alert-unsubscribe'), unsubscribeToken(deriveKeys(a, 'alert-unsubscribe'), address))).toEqual(address);
    }
  });

  it('links signed before the rotation still verify after it; a key never in the ring does not', () => {
    const url = new URL(createLinkSigner(deriveKeys(before, 'output-links')).url('https://gw.test', 'job_1', expires));
    const [exp, sig] = [url.searchParams.get('exp')!, url.searchParams.get('sig')!];
    expect(createLinkSigner(deriveKeys(promoted, 'output-links')).verify('job_1', exp, sig, new Date())).toBe(true);
    expect(createLinkSigner(deriveKeys(`3:${key()}`, 'output-links')).verify('job_1', exp, sig, new Date())).toBe(false);
  });

  it('in one step, a process still on the old keyring cannot open what the new one sealed', () => {
    expect(() => createSealer(before).open(createSealer(promoted).seal('secret', binding), binding)).toThrow(/key version v2/);
  });
});
