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

export function chatappMessage(finding: FindingRow, link: string): Record<string, unknown> {
  const headline = `${SEVERITY_MARK[finding.severity]} [${finding.severity}] ${finding.title}`;
  return {
    text: `${headline}: ${finding.summary} ${link}`,
    blocks: [
      { type: 'header', text: { type: 'plain_text', text: headline.slice(0, 150) } },
      { type: 'section', text: { type: 'mrkdwn', text: finding.summary } },
      {
        type: 'context',
        elements: [{ type: 'mrkdwn', text: `*${finding.type}* · ${finding.scopeKind} \`${finding.scopeId}\` · <${link}|${finding.id}>` }],
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
