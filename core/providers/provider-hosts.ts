import { hostOnDomain } from '../net/service-url';
import { kindSpec, type ProviderKind } from './kinds';

/**
 * Whether a kind's credential may go to a host (issue 20): a kind with a fixed provider host
 * sends it only to the provider's own default host or a host on the domains the service lists
 * for the kind (the alternate-host rule of spec 2.6); a kind whose URL the customer types
 * (`alternateHosts: 'any'`) to any host. The refusals are named by the spec's codes.
 */
export function providerHostVerdict(kind: ProviderKind, hostname: string): 'ok' | 'alternate_host_not_allowed' | 'alternate_host_off_domain' {
  const spec = kindSpec(kind);
  if (spec.alternateHosts === 'any') return 'ok';
  const host = hostname.toLowerCase();
  if (spec.defaultBaseUrl && new URL(spec.defaultBaseUrl).hostname === host) return 'ok';
  if (spec.alternateHosts.length === 0) return 'alternate_host_not_allowed';
  return spec.alternateHosts.some((d) => hostOnDomain(host, d)) ? 'ok' : 'alternate_host_off_domain';
}
