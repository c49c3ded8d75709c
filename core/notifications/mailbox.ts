/**
 * The mailbox an email address names: lower case, without a `+tag` on the local part (RFC 5233
 * subaddress). Mail systems deliver a tag to the untagged mailbox, so `CFO+1@Example.com` and
 * `cfo+2@example.com` are one recipient: an unsubscribe covers every spelling (suppressions.ts),
 * and the hourly limits count them as one (limits.ts), so a tenant cannot list many spellings of
 * one mailbox to mail it past its limits. Treating a little more as one mailbox than some
 * systems would is the safe side. Migration 0037 applies the same rule in SQL.
 */
export function mailbox(email: string): string {
  return email.trim().toLowerCase().replace(/^([^@+]+)\+[^@]*@/, '$1@');
}
