import type { FindingRow } from '../../core/db/schema';
import { alertEmail, chatappMessage } from '../../core/findings/messages';

const finding = {
  id: 'fnd_1', type: 'mcp.server_failing', severity: 'critical', title: 'MCP server <!channel> is failing',
  summary: '2 listings failed: <https://evil.example|click here> & more', scopeKind: 'mcp_server', scopeId: 'mcps_1',
  windowFrom: new Date('2026-11-26T00:00:00Z'), windowTo: new Date('2026-11-26T01:00:00Z'),
} as FindingRow;

describe('alert messages', () => {
  it('escapes text from elsewhere in a chat app message: no mention, no dressed link, one real link', () => {
    const message = chatappMessage(finding, 'https://gw.test/manage/v1/findings/fnd_1') as { text: string; blocks: Array<{ text?: { type: string; text: string } }> };
    const marked = [message.text, message.blocks[1]!.text!.text].join('\n');
    expect(marked).not.toContain('<!channel>');
    expect(marked).not.toContain('<https://evil');
    expect(marked).toContain('&lt;!channel&gt;');
    expect(marked).toContain('&amp; more');
    expect(message.text).toContain('https://gw.test/manage/v1/findings/fnd_1');
    // The header is the gateway's own words: the tenant's title is only in the escaped section (issue 33).
    expect(message.blocks[0]!.text).toMatchObject({ type: 'plain_text', text: '🚨 [critical] Tool server failing' });
    expect(message.blocks[1]!.text!.text).toContain('MCP server &lt;!channel&gt; is failing');
  });

  it('writes an email with the summary, the facts and the link, HTML escaped', () => {
    const mail = alertEmail(finding, 'https://gw.test/manage/v1/findings/fnd_1');
    // The subject is a header: no tenant text in it (issue 33); the title is in the escaped body.
    expect(mail.subject).toBe('[critical] Tool server failing');
    expect(mail.text).toContain('MCP server <!channel> is failing');
    expect(mail.text).toContain('Scope: mcp_server mcps_1');
    expect(mail.text).toContain('https://gw.test/manage/v1/findings/fnd_1');
    expect(mail.html).not.toContain('<https://evil');
    expect(mail.html).toContain('&#60;!channel&#62;');
  });
});
