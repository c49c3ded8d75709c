import type { Executor } from '../db/client';
import type { VideoAdapter } from '../providers/video/types';
import { videoListPrice, videoPrice, type PerSecondPrice } from '../spend/job-spend';

/**
 * What a video job is held at before it starts and settles at when it succeeds: the same
 * seconds and the same price variant both times (issue 20), so a render can never cost more
 * than was held for it. The seconds are the job's `duration_seconds`, else the wire's default
 * (which the submit then asks for explicitly); never 0.
 */
export function plannedSeconds(adapter: VideoAdapter, requested: number | undefined): number {
  return requested ?? adapter.defaultSeconds;
}

type Variant = Record<string, string | number> & { usd_per_second: number };
type VariantRow = { usd_per_second: number; default?: Record<string, string>; variants?: Variant[] };

/**
 * The list rate of the variant asked (the row's default when the field is absent): a value the
 * row does not list is unpriced (null), as an unlisted model is, never the cheapest rate.
 */
function variantRate(row: VariantRow, field: string | null, extra: Record<string, unknown>): number | null {
  if (!field || !row.variants) return row.usd_per_second;
  const asked = extra[field] ?? row.default?.[field];
  return row.variants.find((v) => v[field] === asked)?.usd_per_second ?? null;
}

const perSecond = (seconds: number, rate: number) => Math.round(seconds * rate * 1e9) / 1e9;

/**
 * A video job's seconds and price on one candidate: the customer's per-second rate (which is
 * the same whatever the size), else the list rate of the variant asked, else unpriced.
 */
export async function videoJobPrice(db: Executor, input: {
  orgId: string; kind: string; adapter: VideoAdapter; models: string[]; durationSeconds: number | undefined; extra: Record<string, unknown>;
}): Promise<{ seconds: number; price: PerSecondPrice }> {
  const seconds = plannedSeconds(input.adapter, input.durationSeconds);
  const price = await videoPrice(db, input.orgId, input.kind, input.models, seconds);
  if (price?.source !== 'list') return { seconds, price };
  const row = videoListPrice(input.kind, input.models) as VariantRow | null;
  const rate = row ? variantRate(row, input.adapter.priceVariant, input.extra) : null;
  return { seconds, price: rate === null ? null : { cost: perSecond(seconds, rate), source: 'list' } };
}
