import { eq } from 'drizzle-orm';
import type { Database } from '../db/client';
import { DEFAULT_PROMPT_RETENTION_DAYS, orgSettings } from '../db/schema';

const DAY_MS = 86_400_000;

/**
 * A batch's files hold prompts and answers, so they are kept as long as the organization keeps
 * prompts (`prompt_logging_retention_days`, 30 days unless set): the retention run deletes them
 * with their object after that (issue 56).
 */
export async function batchFileExpiry(db: Database, orgId: string, now: Date): Promise<Date> {
  const [settings] = await db.select({ days: orgSettings.promptLoggingRetentionDays }).from(orgSettings).where(eq(orgSettings.orgId, orgId));
  return new Date(now.getTime() + (settings?.days ?? DEFAULT_PROMPT_RETENTION_DAYS) * DAY_MS);
}
