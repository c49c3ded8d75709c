import type { FindingRow } from '../db/schema';

/**
 * How a finding reads outside the API: the chat app message (an incoming-webhook body the common
 * chat apps accept: `text` for notifications and clients without blocks, `blocks` for the
 * rest) and the email (plain text and HTML). Pure, so they are tested on fixtures.
 */

const SEVERITY_MARK = { info: 'ℹ️', warning: '⚠️', critical: '🚨' } as const;

/**
 * What a finding's type is called where no tenant text may stand (an email's subject, a chat
 * message's header): a finding's title carries names a tenant chose (a model, a tool, a
 * customer id), so it goes only into the escaped body.
 */
const TYPE_LABEL: Record<string, string> = {
  'spend.anomaly': 'Spend anomaly',
  'spend.forecast_over_budget': 'Budget forecast exceeded',
  'cost.drift': 'Cost drift',
  'budget.threshold_crossed': 'Budget threshold crossed',
  'connection.failing': 'Connection failing',
  'unpriced.traffic': 'Unpriced traffic',
  'traffic.model_changed': 'Served model changed',
  'traffic.regression': 'Traffic regression',
  'mcp.tool_changed': 'Tool definition changed',
  'mcp.server_failing': 'Tool server failing',
};

export function findingHeadline(finding: Pick<FindingRow, 'severity' | 'type'>): string {
  return `[${finding.severity}] ${TYPE_LABEL[finding.type] ?? 'Alert'}`;
}

/** Where a person reads the finding: the management API's own read of it. */
export function findingLink(publicUrl: string, finding: Pick<FindingRow, 'id'>): string {
  return `${publicUrl}/manage/v1/findings/${finding.id}`;
}

/**
 * Chat apps read `<...>` as links and mentions (`<!channel>`): text that came from elsewhere (a
 * tool name, a provider's error, a model id) is escaped so it cannot ping a room or dress a link.
 */
const escapeChat = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

export function chatappMessage(finding: FindingRow, link: string): Record<string, unknown> {
  const headline = `${SEVERITY_MARK[finding.severity]} ${findingHeadline(finding)}`;
  const title = escapeChat(finding.title);
  const summary = escapeChat(finding.summary);
  return {
    text: `${headline}: ${title}. ${summary} ${link}`,
    blocks: [
      // The header is ours alone; the tenant's words stay in the escaped section.
      { type: 'header', text: { type: 'plain_text', text: headline } },
      { type: 'section', text: { type: 'mrkdwn', text: `*${title}*\n${summary}` } },
      {
        type: 'context',
        elements: [{ type: 'mrkdwn', text: `*${finding.type}* · ${finding.scopeKind} \`${escapeChat(finding.scopeId)}\` · <${link}|${finding.id}>` }],
      },
    ],
  };
}

export type AlertEmail = { subject: string; text: string; html: string };

/** Text made safe inside HTML: every character that could open markup or an attribute, as an entity. */
export const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export function alertEmail(finding: FindingRow, link: string): AlertEmail {
  // The subject is a header: no tenant text in it, only in the escaped body.
  const subject = findingHeadline(finding);
  const facts: Array<[string, string]> = [
    ['Type', finding.type],
    ['Severity', finding.severity],
    ['Scope', `${finding.scopeKind} ${finding.scopeId}`],
    ['Window', `${finding.windowFrom.toISOString()} to ${finding.windowTo.toISOString()}`],
    ['Finding', finding.id],
  ];
  const text = [finding.title, '', finding.summary, '', ...facts.map(([k, v]) => `${k}: ${v}`), '', link, ''].join('\n');
  const html = [
    `<h2>${escapeHtml(subject)}</h2>`,
    `<p><strong>${escapeHtml(finding.title)}</strong></p>`,
    `<p>${escapeHtml(finding.summary)}</p>`,
    '<table>',
    ...facts.map(([k, v]) => `<tr><th align="left">${escapeHtml(k)}</th><td>${escapeHtml(v)}</td></tr>`),
    '</table>',
    `<p><a href="${escapeHtml(link)}">${escapeHtml(link)}</a></p>`,
  ].join('\n');
  return { subject, text, html };
}
