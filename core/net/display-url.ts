/**
 * A receiver's URL as an operator read shows it: scheme, host and path. Never its user-info or
 * query, where an application often puts a token (`https://user:pass@hooks.example/x?sig=...`):
 * a delivery log or a job's timeline is no place for one.
 */
export function displayUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '(unreadable URL)';
  }
}
