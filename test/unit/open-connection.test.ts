import { createSealer, newKeyring } from '../../core/crypto/sealing';
import type { providerConnections } from '../../core/db/schema';
import { openConnection } from '../../core/providers/open-connection';

type Row = typeof providerConnections.$inferSelect;

/**
 * A credential is opened only for a host it may go to (issue 20): a fixed-host kind whose base
 * URL was pointed at a public host the provider does not own (a row written before management
 * checked it) opens with no secrets, so routing treats it as unusable and nothing is sent there.
 */
describe('openConnection', () => {
  const sealer = createSealer(newKeyring());
  const row = (kind: string, baseUrl?: string): Row => {
    const id = `conn_${kind}${baseUrl?.length ?? 0}`;
    return {
      id, orgId: 'org_1', kind, config: baseUrl ? { base_url: baseUrl } : {},
      secretSealed: sealer.seal('sk-live-1', { orgId: 'org_1', recordId: id, field: 'secret' }), fallbackSecretsSealed: null,
    } as unknown as Row;
  };

  it('opens the credential for the provider\'s own hosts, its listed domains, and any host of a kind whose URL the customer types', () => {
    expect(openConnection(row('openai'), sealer)).toEqual({ baseUrl: 'https://api.openai.com/v1', secrets: ['sk-live-1'] });
    expect(openConnection(row('openai', 'https://us.api.openai.com/v1'), sealer).secrets).toEqual(['sk-live-1']);
    expect(openConnection(row('custom', 'https://llm.example.net/v1'), sealer).secrets).toEqual(['sk-live-1']);
    // A private host is the guarded dispatcher's to refuse (development points kinds at a local sandbox).
    expect(openConnection(row('openai', 'http://127.0.0.1:8090/openai/v1'), sealer).secrets).toEqual(['sk-live-1']);
  });

  it('opens nothing for a fixed-host kind pointed at a public host the provider does not own', () => {
    expect(openConnection(row('openai', 'https://collector.example.net/v1'), sealer)).toEqual({ baseUrl: 'https://collector.example.net/v1', secrets: [] });
    expect(openConnection(row('openai', 'https://api.openai.com.evil.example/v1'), sealer).secrets).toEqual([]);
    expect(openConnection(row('groq', 'https://llm.example.net/openai/v1'), sealer).secrets).toEqual([]);
    expect(openConnection(row('anthropic', 'not a url'), sealer).secrets).toEqual([]);
  });
});
