import type { FindingRow } from '../db/schema';

/**
 * How a finding reads outside the API: the chat app message (an incoming-webhook body the common
 * chat apps accept: `text` for notifications and clients without blocks, `blocks` for the
 * rest) and the email (plain text and HTML). Pure, so they are tested on fixtures.
 */

const SEVERITY_MARK = { info: 'ℹ️', warning: '⚠️', critical: '🚨' } as const;

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
  const headline = `${SEVERITY_MARK[finding.severity]} [${finding.severity}] ${escapeChat(finding.title)}`;
  const summary = escapeChat(finding.summary);
  return {
    text: `${headline}: ${summary} ${link}`,
    blocks: [
      // plain_text is never parsed for links or mentions.
      { type: 'header', text: { type: 'plain_text', text: `${SEVERITY_MARK[finding.severity]} [${finding.severity}] ${finding.title}`.slice(0, 150) } },
      { type: 'section', text: { type: 'mrkdwn', text: summary } },
      {
        type: 'context',
        elements: [{ type: 'mrkdwn', text: `*${finding.type}* · ${finding.scopeKind} \`${escapeChat(finding.scopeId)}\` · <${link}|${finding.id}>` }],
      },
    ],
  };
}

export type AlertEmail = { subject: string; text: string; html: string };

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export function alertEmail(finding: FindingRow, link: string): AlertEmail {
  const subject = `[${finding.severity}] ${finding.title}`;
  const facts: Array<[string, string]> = [
    ['Type', finding.type],
    ['Severity', finding.severity],
    ['Scope', `${finding.scopeKind} ${finding.scopeId}`],
    ['Window', `${finding.windowFrom.toISOString()} to ${finding.windowTo.toISOString()}`],
    ['Finding', finding.id],
  ];
  const text = [finding.summary, '', ...facts.map(([k, v]) => `${k}: ${v}`), '', link, ''].join('\n');
  const html = [
    `<h2>${escapeHtml(subject)}</h2>`,
    `<p>${escapeHtml(finding.summary)}</p>`,
    '<table>',
    ...facts.map(([k, v]) => `<tr><th align="left">${escapeHtml(k)}</th><td>${escapeHtml(v)}</td></tr>`),
    '</table>',
    `<p><a href="${escapeHtml(link)}">${escapeHtml(link)}</a></p>`,
  ].join('\n');
  return { subject, text, html };
}
