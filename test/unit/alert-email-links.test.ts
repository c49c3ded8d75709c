import { randomBytes } from 'node:crypto';
import { mailbox } from '../../core/notifications/mailbox';
import { readResubscribeToken, readUnsubscribeToken, resubscribeToken, unsubscribeToken } from '../../core/notifications/unsubscribe';

/** Issue 52 item 6: the links of an alert email's recipient, and the mailbox an unsubscribe is kept under. */
describe('alert email links', () => {
  const key = randomBytes(32);
  const address = { orgId: 'org_1', channelId: 'nch_1', email: 'cfo@example.com' };

  it('reads each link only for its own purpose and key', () => {
    const unsubscribe = unsubscribeToken(key, address);
    const resubscribe = resubscribeToken(key, address);
    expect(readUnsubscribeToken(key, unsubscribe)).toEqual(address);
    expect(readResubscribeToken(key, resubscribe)).toEqual(address);
    // A link of one kind is never the other, nor good under another key.
    expect(readResubscribeToken(key, unsubscribe)).toBeNull();
    expect(readUnsubscribeToken(key, resubscribe)).toBeNull();
    expect(readUnsubscribeToken(randomBytes(32), unsubscribe)).toBeNull();
    // Another address under the same signature is refused.
    const [, signature] = unsubscribe.split('.');
    const other = Buffer.from(JSON.stringify(['org_1', 'nch_1', 'someone@example.com'])).toString('base64url');
    expect(readUnsubscribeToken(key, `${other}.${signature}`)).toBeNull();
    expect(readUnsubscribeToken(key, `${unsubscribe}.x`)).toBeNull();
  });

  it('keeps the mailbox of an address: case, spaces and a +tag do not make another', () => {
    expect(mailbox(' CFO+Alerts@Example.com ')).toBe('cfo@example.com');
    expect(mailbox('a+b+c@d.example')).toBe('a@d.example');
    // Nothing before the tag: the address is kept as it is.
    expect(mailbox('+x@y.example')).toBe('+x@y.example');
  });
});
