import { fingerprintOf } from '../../core/findings/detection';
import {
  DAY_MS, detectAnsweredMismatch, detectConnectionFailing, detectCostDrift, detectForecastOverBudget, detectModelChanged, detectPriceChange,
  detectRegression, detectSpendAnomaly, detectThresholdCrossed, detectUnpricedTraffic, floorToHour, formatDollars, HOUR_MS, mad, median,
  WEEK_MS, type BudgetUse, type ConnectionWindow, type Crossing, type HourlySpend, type LatencyWindow, type ModelDay, type PriceChange, type ServedModels,
  type SpendSeries,
} from '../../core/findings/detectors';

/** A Monday afternoon: the last complete hour is 13:00 UTC. */
const NOW = new Date('2025-03-10T14:25:00Z');
const ORG = 'org_1';
const SETTINGS = { dollarFloor: 25 };

/** mulberry32: a small seeded PRNG, so the "noise" is the same on every run. */
function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A copy of `base` with `patch` over it (the style here builds no literal that begins with a spread). */
function changed<T extends object>(base: T, patch: Partial<T>): T {
  return Object.assign({}, base, patch);
}

/** Uniform noise of ±15% around 1. */
function noise(random: () => number): number {
  return 1 + 0.15 * (2 * random() - 1);
}

/**
 * Normal traffic: a daily cycle (0.4x at 02:00 to 1.6x at 14:00 UTC), weekends at 0.6x, ±15%
 * noise, around $5 an hour; 60 requests per dollar.
 */
function seasonalHours(from: Date, to: Date, seed = 7): HourlySpend[] {
  const random = prng(seed);
  const hours: HourlySpend[] = [];
  for (let at = floorToHour(from).getTime(); at < to.getTime(); at += HOUR_MS) {
    const d = new Date(at);
    const daily = 1 + 0.6 * Math.sin((2 * Math.PI * (d.getUTCHours() - 8)) / 24);
    const weekly = d.getUTCDay() === 0 || d.getUTCDay() === 6 ? 0.6 : 1;
    const cost = Math.round(5 * daily * weekly * noise(random) * 100) / 100;
    hours.push({ hour: d, cost, requests: Math.round(cost * 60) });
  }
  return hours;
}

function sumCost(hours: HourlySpend[], from: number, to: number): number {
  return hours.filter((h) => h.hour.getTime() >= from && h.hour.getTime() < to).reduce((sum, h) => sum + h.cost, 0);
}

/** A clock a few minutes into the hour after `target`, so `target` is the last complete hour. */
function clockFor(target: number): Date {
  return new Date(target + HOUR_MS + 7 * 60_000);
}

const LAST_HOUR = floorToHour(NOW).getTime();
/** Five weeks and a day of normal traffic up to and including the hour in progress. */
const SEASONAL = seasonalHours(new Date(LAST_HOUR - 36 * DAY_MS), new Date(LAST_HOUR + HOUR_MS));
/** The targets: every hour of the last week. */
const LAST_WEEK_TARGETS = Array.from({ length: 168 }, (_, i) => LAST_HOUR - HOUR_MS - i * HOUR_MS);

function withSpike(hours: HourlySpend[], at: number, factor: number): HourlySpend[] {
  return hours.map((h) => (h.hour.getTime() === at ? { hour: h.hour, cost: h.cost * factor, requests: h.requests * factor } : h));
}

function series(hours: HourlySpend[]): SpendSeries {
  return { orgId: ORG, scope: { kind: 'project', id: 'prj_1' }, hours };
}

describe('robust statistics', () => {
  it('takes the median and MAD of odd and even counts', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([])).toBeNaN();
    expect(mad([10, 12, 11, 13], 11.5)).toBe(1);
  });

  it('formats dollars with cents, and never shows a real cost as $0.00', () => {
    expect(formatDollars(42.1)).toBe('$42.10');
    expect(formatDollars(1234)).toBe('$1,234.00');
    expect(formatDollars(0.0042)).toBe('$0.0042');
    expect(formatDollars(0.075, 6)).toBe('$0.075');
  });
});

describe('spend anomaly', () => {
  /** A flat $10 an hour for `days` days before the last complete hour, then `x` in that hour. */
  function flat(days: number, x: number, requests = 100): SpendSeries {
    const target = LAST_HOUR - HOUR_MS;
    const hours: HourlySpend[] = [];
    for (let at = target - days * DAY_MS; at < target; at += HOUR_MS) hours.push({ hour: new Date(at), cost: 10, requests: 100 });
    hours.push({ hour: new Date(target), cost: x, requests });
    return series(hours);
  }

  it('fires a warning at z 7 over a flat trailing week, where the scale floor is a tenth of the median', () => {
    const d = detectSpendAnomaly(flat(7, 17), NOW, { dollarFloor: 5 })!;
    expect(d).toMatchObject({
      type: 'spend.anomaly', severity: 'warning', observed: 17, expected: 10, threshold: 6,
      scope: { kind: 'project', id: 'prj_1' }, subject: {},
      window: { from: new Date('2025-03-10T13:00:00Z'), to: new Date('2025-03-10T14:00:00Z') },
      evidence: { z: 7, median: 10, mad: 0, scale: 1, baseline: 'trailing_7_days', baseline_points: 168, requests: 100, excess: 7 },
    });
    expect(d.summary).toBe('Project prj_1 spent $17.00 over 100 requests in the hour from 2025-03-10 13:00 UTC, '
      + '$7.00 above the usual $10.00 for the previous seven days (robust z 7.0).');
    expect(detectSpendAnomaly(flat(7, 20), NOW, { dollarFloor: 5 })!.severity).toBe('critical');
  });

  it('does not fire below z 6, under the dollar floor, or on 19 requests', () => {
    expect(detectSpendAnomaly(flat(7, 15.9), NOW, { dollarFloor: 5 })).toBeNull();
    expect(detectSpendAnomaly(flat(7, 16), NOW, { dollarFloor: 5 })!.severity).toBe('warning');
    expect(detectSpendAnomaly(flat(7, 17), NOW, { dollarFloor: 7.01 })).toBeNull();
    expect(detectSpendAnomaly(flat(7, 17, 19), NOW, { dollarFloor: 5 })).toBeNull();
  });

  it('needs a day of history for the trailing baseline', () => {
    const target = LAST_HOUR - HOUR_MS;
    const short = flat(1, 500).hours.filter((h) => h.hour.getTime() >= target - 23 * HOUR_MS);
    expect(detectSpendAnomaly(series(short), NOW, SETTINGS)).toBeNull();
    const day = flat(1, 500).hours.filter((h) => h.hour.getTime() >= target - 24 * HOUR_MS);
    expect(detectSpendAnomaly(series(day), NOW, SETTINGS)!.evidence).toMatchObject({ baseline_points: 24 });
  });

  it('counts hours missing after the first one present as $0', () => {
    const target = LAST_HOUR - HOUR_MS;
    const sparse = series([
      { hour: new Date(target - 48 * HOUR_MS), cost: 40, requests: 300 },
      { hour: new Date(target - 20 * HOUR_MS), cost: 40, requests: 300 },
      { hour: new Date(target), cost: 30, requests: 200 },
    ]);
    const d = detectSpendAnomaly(sparse, NOW, SETTINGS)!;
    // 48 baseline hours, two of them $40: the median and MAD are $0 and the scale its one-cent floor.
    expect(d.evidence).toMatchObject({ baseline: 'trailing_7_days', baseline_points: 48, median: 0, mad: 0, scale: 0.01, excess: 30 });
    expect(d.severity).toBe('critical');
  });

  it('uses the same hour of the previous four weeks once it has four weeks of history, and ignores the hour in progress', () => {
    const target = LAST_HOUR - HOUR_MS;
    // Every other hour costs $100, so only the four same-hour points can make a median of $11.50.
    const hours = seasonalHours(new Date(target - 28 * DAY_MS), new Date(target)).map((h) => ({ hour: h.hour, cost: 100, requests: 100 }));
    const weekly = [10, 12, 11, 13];
    for (const h of hours) {
      const weeksBack = (target - h.hour.getTime()) / WEEK_MS;
      if (Number.isInteger(weeksBack)) h.cost = weekly[weeksBack - 1]!;
    }
    hours.push({ hour: new Date(target), cost: 30, requests: 50 }, { hour: new Date(LAST_HOUR), cost: 5000, requests: 5000 });
    const d = detectSpendAnomaly(series(hours), NOW, { dollarFloor: 10 })!;
    expect(d.evidence).toMatchObject({ baseline: 'same_hour_of_week', baseline_points: 4, median: 11.5, mad: 1, scale: 1.4826 });
    expect(d.evidence.z).toBeCloseTo(18.5 / 1.4826, 10);
    expect(d).toMatchObject({ severity: 'critical', observed: 30, expected: 11.5 });
    expect(d.summary).toContain('for the same hour of the previous four weeks');
  });

  it('raises nothing on four weeks of seasonal traffic with ±15% noise, for every hour of the last week', () => {
    for (const target of LAST_WEEK_TARGETS) {
      expect([target, detectSpendAnomaly(series(SEASONAL), clockFor(target), SETTINGS)]).toEqual([target, null]);
    }
  });

  it('raises nothing on the trailing-week baseline either (two weeks of the same traffic)', () => {
    const recent = SEASONAL.filter((h) => h.hour.getTime() >= LAST_HOUR - 14 * DAY_MS);
    for (const target of LAST_WEEK_TARGETS) {
      expect([target, detectSpendAnomaly(series(recent), clockFor(target), SETTINGS)]).toEqual([target, null]);
    }
  });

  it('fires critical on a 10x spike at a weekday peak, on either baseline', () => {
    const peak = Date.parse('2025-03-07T14:00:00Z'); // a Friday
    const spiked = withSpike(SEASONAL, peak, 10);
    const seasonal = detectSpendAnomaly(series(spiked), clockFor(peak), SETTINGS)!;
    expect(seasonal).toMatchObject({ type: 'spend.anomaly', severity: 'critical', evidence: { baseline: 'same_hour_of_week' } });
    expect(seasonal.evidence.excess as number).toBeGreaterThan(60);
    const recent = spiked.filter((h) => h.hour.getTime() >= LAST_HOUR - 14 * DAY_MS);
    const trailing = detectSpendAnomaly(series(recent), clockFor(peak), SETTINGS)!;
    expect(trailing).toMatchObject({ severity: 'critical', evidence: { baseline: 'trailing_7_days' } });
  });

  it('does not fire on a 10x spike whose excess is under the dollar floor', () => {
    const night = Date.parse('2025-03-09T03:00:00Z'); // Sunday, the quietest hours
    const spiked = withSpike(SEASONAL, night, 10);
    const excess = spiked.find((h) => h.hour.getTime() === night)!.cost - SEASONAL.find((h) => h.hour.getTime() === night)!.cost;
    expect(excess).toBeLessThan(SETTINGS.dollarFloor);
    expect(detectSpendAnomaly(series(spiked), clockFor(night), SETTINGS)).toBeNull();
    // The floor is what held it back: with a lower one the same spike fires.
    expect(detectSpendAnomaly(series(spiked), clockFor(night), { dollarFloor: 5 })!.severity).toBe('critical');
  });
});

describe('forecast over budget', () => {
  const at = new Date('2025-03-10T12:00:00Z');
  const use: BudgetUse = {
    orgId: ORG, scope: { kind: 'project', id: 'prj_1' }, budget: 'spend_limit', limit: 1000,
    periodStart: new Date('2025-03-01T00:00:00Z'), periodEnd: new Date('2025-04-01T00:00:00Z'), spent: 700, last24h: 48,
  };

  it('forecasts the exhaustion time inside the period exactly', () => {
    // $2 an hour; $300 left runs out in 150 hours; 516 hours to the period end project $1,732.
    const d = detectForecastOverBudget(use, at)!;
    expect(d).toMatchObject({
      type: 'spend.forecast_over_budget', severity: 'warning', scope: { kind: 'project', id: 'prj_1' }, subject: {},
      window: { from: use.periodStart, to: at }, observed: 1732, expected: 700, threshold: 1000,
      evidence: {
        budget: 'spend_limit', limit: 1000, spent: 700, last24h: 48, hourly_rate: 2, projected: 1732,
        projected_exhaustion_at: '2025-03-16T18:00:00.000Z', period_end: '2025-04-01T00:00:00.000Z',
      },
    });
    expect(d.title).toBe('Spend limit of project prj_1 forecast to run out');
    expect(d.summary).toBe('At $2.00 an hour, project prj_1 reaches its $1,000.00 spend limit at 2025-03-16 18:00 UTC, '
      + 'before its period ends at 2025-04-01 00:00 UTC ($700.00 spent, $1,732.00 projected).');
  });

  it('is critical when the budget runs out within a day, and when it is already used up', () => {
    const soon = detectForecastOverBudget(changed(use, { spent: 952 }), at)!;
    expect(soon.severity).toBe('critical');
    expect(soon.evidence.projected_exhaustion_at).toBe('2025-03-11T12:00:00.000Z');
    expect(detectForecastOverBudget(changed(use, { spent: 951.9 }), at)!.severity).toBe('warning');
    const usedUp = detectForecastOverBudget(changed(use, { spent: 1020, last24h: 0 }), at)!;
    expect(usedUp).toMatchObject({ severity: 'critical', title: 'Spend limit of project prj_1 used up' });
    expect(usedUp.evidence.projected_exhaustion_at).toBe(at.toISOString());
  });

  it('does not fire when it runs out exactly at the period end, without a pace, or after the period', () => {
    expect(detectForecastOverBudget(changed(use, { periodEnd: new Date('2025-03-16T18:00:00Z') }), at)).toBeNull();
    expect(detectForecastOverBudget(changed(use, { periodEnd: new Date('2025-03-16T18:00:00.001Z') }), at)).not.toBeNull();
    expect(detectForecastOverBudget(changed(use, { last24h: 0 }), at)).toBeNull();
    expect(detectForecastOverBudget(changed(use, { spent: 1200 }), new Date('2025-04-01T00:00:00Z'))).toBeNull();
    expect(detectForecastOverBudget(changed(use, { limit: 0, spent: 0 }), at)).toBeNull();
  });

  it('names the budget in the title, evidence and subject (each budget of one scope is its own finding)', () => {
    const credit = detectForecastOverBudget(changed(use, { budget: 'credit_limit' }), at)!;
    expect(credit.title).toBe('Credit limit of project prj_1 forecast to run out');
    expect(credit.evidence.budget).toBe('credit_limit');
    expect(credit.subject).toEqual({ budget: 'credit_limit' });
    expect(fingerprintOf(credit)).not.toBe(fingerprintOf(detectForecastOverBudget(use, at)!));
  });

  it('raises nothing on a month of seasonal spend under a limit that fits it, for every hour of the last week', () => {
    const periodStart = Date.parse('2025-02-20T00:00:00Z');
    const monthly = changed(use, { periodStart: new Date(periodStart), periodEnd: new Date('2025-03-20T00:00:00Z') });
    for (const target of LAST_WEEK_TARGETS) {
      const now = new Date(target + HOUR_MS);
      const spent = sumCost(SEASONAL, periodStart, now.getTime());
      const last24h = sumCost(SEASONAL, now.getTime() - DAY_MS, now.getTime());
      expect([target, detectForecastOverBudget(changed(monthly, { limit: 5000, spent, last24h }), now)]).toEqual([target, null]);
    }
    // The same pace against a limit it will not fit: a warning, days before the period ends.
    const spent = sumCost(SEASONAL, periodStart, NOW.getTime());
    const last24h = sumCost(SEASONAL, NOW.getTime() - DAY_MS, NOW.getTime());
    expect(detectForecastOverBudget(changed(monthly, { limit: spent + 200, spent, last24h }), NOW)!.severity).toBe('warning');
  });
});

describe('threshold crossed', () => {
  const crossing: Crossing = {
    orgId: ORG, scope: { kind: 'key', id: 'key_1' }, budget: 'spend_limit', window: '2025-03-01', fraction: 0.8,
    limit: 1000, spent: 812.4, crossedAt: new Date('2025-03-10T13:12:00Z'),
  };

  it('always makes a detection, with severity by fraction', () => {
    const d = detectThresholdCrossed(crossing);
    expect(d).toMatchObject({
      type: 'budget.threshold_crossed', severity: 'warning', scope: { kind: 'key', id: 'key_1' },
      subject: { budget: 'spend_limit:2025-03-01:0.8' }, window: { from: crossing.crossedAt, to: crossing.crossedAt },
      observed: 812.4, threshold: 800, evidence: { budget: 'spend_limit', window: '2025-03-01', fraction: 0.8, limit: 1000, spent: 812.4 },
    });
    expect(d.title).toBe('Key key_1 reached 80% of its spend limit');
    expect(d.summary).toBe('Key key_1 has spent $812.40 of its $1,000.00 spend limit in the period starting 2025-03-01, crossing 80% at 2025-03-10 13:12 UTC.');
    expect(detectThresholdCrossed(changed(crossing, { fraction: 0.7999 })).severity).toBe('info');
    expect(detectThresholdCrossed(changed(crossing, { fraction: 0.5 })).severity).toBe('info');
    expect(detectThresholdCrossed(changed(crossing, { fraction: 0.99 })).severity).toBe('warning');
    expect(detectThresholdCrossed(changed(crossing, { fraction: 1 })).severity).toBe('critical');
    expect(detectThresholdCrossed(changed(crossing, { window: 'lifetime' })).summary).toContain('over its lifetime');
  });

  it('is one finding per budget, window and fraction', () => {
    const base = fingerprintOf(detectThresholdCrossed(crossing));
    expect(fingerprintOf(detectThresholdCrossed(changed(crossing, { spent: 850 })))).toBe(base);
    expect(fingerprintOf(detectThresholdCrossed(changed(crossing, { fraction: 1 })))).not.toBe(base);
    expect(fingerprintOf(detectThresholdCrossed(changed(crossing, { window: '2025-04-01' })))).not.toBe(base);
    expect(fingerprintOf(detectThresholdCrossed(changed(crossing, { budget: 'hard_cap' })))).not.toBe(base);
  });

  it('a month of seasonal spend under its limit crosses only 50%, as info', () => {
    const march = seasonalHours(new Date('2025-03-01T00:00:00Z'), new Date('2025-04-01T00:00:00Z'), 11);
    const limit = 5000;
    const crossings: Crossing[] = [];
    let spent = 0;
    const pending = [0.5, 0.8, 1];
    for (const h of march) {
      spent += h.cost;
      while (pending.length > 0 && spent >= pending[0]! * limit) {
        crossings.push(changed(crossing, { scope: { kind: 'project', id: 'prj_1' }, fraction: pending.shift()!, limit, spent, crossedAt: h.hour }));
      }
    }
    expect(crossings.map((c) => detectThresholdCrossed(c).severity)).toEqual(['info']);
  });
});

describe('cost drift', () => {
  const day: ModelDay = { orgId: ORG, model: 'gpt-4o', day: new Date('2025-03-09T00:00:00Z'), requests: 1200, reported: 120, estimated: 100 };

  it('fires on more than 10% drift, critical beyond 25%', () => {
    const d = detectCostDrift(day)!;
    expect(d).toMatchObject({
      type: 'cost.drift', severity: 'warning', scope: { kind: 'model', id: 'gpt-4o' }, subject: {},
      window: { from: day.day, to: new Date('2025-03-10T00:00:00Z') }, observed: 120, expected: 100, threshold: 0.1,
      evidence: { requests: 1200, reported: 120, estimated: 100 },
    });
    expect(d.evidence.drift).toBeCloseTo(-1 / 6, 12);
    expect(d.summary).toBe('For 1,200 requests to gpt-4o on 2025-03-09 the provider reported $120.00 and we estimated $100.00, 16.7% low.');
    expect(detectCostDrift(changed(day, { reported: 100, estimated: 111 }))!.severity).toBe('warning');
    expect(detectCostDrift(changed(day, { reported: 100, estimated: 125 }))!.severity).toBe('warning');
    expect(detectCostDrift(changed(day, { reported: 100, estimated: 126 }))!.severity).toBe('critical');
    expect(detectCostDrift(changed(day, { reported: 100, estimated: 74 }))!.severity).toBe('critical');
  });

  it('does not fire at 9% or exactly 10% drift, or on 49 requests', () => {
    expect(detectCostDrift(changed(day, { reported: 100, estimated: 109 }))).toBeNull();
    expect(detectCostDrift(changed(day, { reported: 100, estimated: 91 }))).toBeNull();
    expect(detectCostDrift(changed(day, { reported: 100, estimated: 110 }))).toBeNull();
    expect(detectCostDrift(changed(day, { requests: 49 }))).toBeNull();
    expect(detectCostDrift(changed(day, { requests: 50 }))).not.toBeNull();
  });

  it('treats a provider reporting $0 against a real estimate as all drift, and $0 against $0 as none', () => {
    expect(detectCostDrift(changed(day, { reported: 0, estimated: 5 }))!.severity).toBe('critical');
    expect(detectCostDrift(changed(day, { reported: 0, estimated: 0 }))).toBeNull();
  });

  it('raises nothing over four weeks of seasonal days whose hourly estimates are off by up to ±15%', () => {
    const random = prng(99);
    const days = new Map<number, ModelDay>();
    for (const h of SEASONAL) {
      const start = Math.floor(h.hour.getTime() / DAY_MS) * DAY_MS;
      const d = days.get(start) ?? { orgId: ORG, model: 'gpt-4o', day: new Date(start), requests: 0, reported: 0, estimated: 0 };
      d.requests += h.requests;
      d.reported += h.cost;
      d.estimated += h.cost * noise(random);
      days.set(start, d);
    }
    const whole = [...days.values()].filter((d) => d.day.getTime() + DAY_MS <= LAST_HOUR);
    expect(whole.length).toBeGreaterThanOrEqual(28);
    expect(whole.map(detectCostDrift).filter((d) => d !== null)).toEqual([]);
  });
});

describe('price change', () => {
  const change: PriceChange = {
    orgId: ORG, model: 'gpt-4o', day: new Date('2025-03-09T00:00:00Z'),
    previous: { input: 2.5, output: 10 }, current: { input: 2, output: 10 },
  };

  it('fires as info when either price differs, as its own finding apart from drift', () => {
    const d = detectPriceChange(change)!;
    expect(d).toMatchObject({
      type: 'cost.drift', severity: 'info', scope: { kind: 'model', id: 'gpt-4o#price' }, subject: {},
      evidence: { kind: 'price_changed', previous: { input: 2.5, output: 10 }, current: { input: 2, output: 10 } },
    });
    expect(d.summary).toBe('The price of gpt-4o per million tokens changed on 2025-03-09: input from $2.50 to $2.00.');
    const drift = detectCostDrift({ orgId: ORG, model: 'gpt-4o', day: change.day, requests: 100, reported: 10, estimated: 20 })!;
    expect(fingerprintOf(d)).not.toBe(fingerprintOf(drift));
    expect(detectPriceChange(changed(change, { previous: { input: 2, output: null } }))!.summary).toContain('output from no price to $10.00');
    expect(detectPriceChange(changed(change, { current: { input: 0.075, output: 10 } }))!.summary).toContain('to $0.075');
  });

  it('does not fire when both prices are unchanged, including both unpriced', () => {
    expect(detectPriceChange(changed(change, { current: { input: 2.5, output: 10 } }))).toBeNull();
    expect(detectPriceChange(changed(change, { previous: { input: null, output: null }, current: { input: null, output: null } }))).toBeNull();
  });

  it('raises nothing over four weeks of days on a steady price list', () => {
    const days = Array.from({ length: 28 }, (_, i) => new Date(LAST_HOUR - (i + 1) * DAY_MS));
    expect(days.map((d) => detectPriceChange(changed(change, { day: d, current: { input: 2.5, output: 10 } })))).toEqual(days.map(() => null));
  });
});

describe('connection failing', () => {
  const none = { credential: 0, rate_limit: 0, server_error: 0, timeout: 0, connection: 0 };
  const window: ConnectionWindow = {
    orgId: ORG, connectionId: 'conn_1', from: new Date('2025-03-10T14:00:00Z'), to: new Date('2025-03-10T14:15:00Z'),
    attempts: 20, failures: changed(none, { rate_limit: 8, server_error: 4 }),
  };

  it('warns when half of ten or more attempts failed, naming the main reason', () => {
    const d = detectConnectionFailing(window)!;
    expect(d).toMatchObject({
      type: 'connection.failing', severity: 'warning', scope: { kind: 'connection', id: 'conn_1' }, subject: {},
      observed: 0.6, threshold: 0.5, window: { from: window.from, to: window.to },
      evidence: { attempts: 20, failures: window.failures, failure_rate: 0.6, main_reason: 'rate_limit' },
    });
    expect(d.summary).toBe('Connection conn_1 failed 12 of 20 attempts (60%) from 2025-03-10 14:00 to 14:15 UTC, mostly rate limits.');
    expect(detectConnectionFailing(changed(window, { attempts: 10, failures: changed(none, { timeout: 5 }) }))!.severity).toBe('warning');
  });

  it('is critical on three refused credentials, whatever the rate', () => {
    const d = detectConnectionFailing(changed(window, { attempts: 400, failures: changed(none, { credential: 3 }) }))!;
    expect(d).toMatchObject({ severity: 'critical', evidence: { main_reason: 'credential', failure_rate: 3 / 400 } });
    expect(detectConnectionFailing(changed(window, { attempts: 3, failures: changed(none, { credential: 3 }) }))!.severity).toBe('critical');
  });

  it('does not fire on 9 attempts, under half failed, or two refused credentials', () => {
    expect(detectConnectionFailing(changed(window, { attempts: 9, failures: changed(none, { server_error: 9 }) }))).toBeNull();
    expect(detectConnectionFailing(changed(window, { attempts: 10, failures: changed(none, { server_error: 4 }) }))).toBeNull();
    expect(detectConnectionFailing(changed(window, { attempts: 400, failures: changed(none, { credential: 2, timeout: 10 }) }))).toBeNull();
    expect(detectConnectionFailing(changed(window, { attempts: 0, failures: none }))).toBeNull();
  });

  it('raises nothing over four weeks of seasonal hours with a few percent of failures', () => {
    const random = prng(5);
    const windows = SEASONAL.map((h): ConnectionWindow => ({
      orgId: ORG, connectionId: 'conn_1', from: h.hour, to: new Date(h.hour.getTime() + HOUR_MS), attempts: h.requests,
      failures: {
        credential: random() < 0.02 ? 1 : 0,
        rate_limit: Math.round(h.requests * 0.05 * random()),
        server_error: Math.round(h.requests * 0.03 * random()),
        timeout: Math.round(h.requests * 0.02 * random()),
        connection: random() < 0.1 ? 1 : 0,
      },
    }));
    expect(windows.map(detectConnectionFailing).filter((d) => d !== null)).toEqual([]);
  });
});

describe('unpriced traffic', () => {
  const u = { orgId: ORG, model: 'mystery-1', from: new Date('2025-03-10T13:00:00Z'), to: new Date('2025-03-10T14:00:00Z'), requests: 1234 };

  it('warns on any request to a model with no price, and never states a cost', () => {
    const d = detectUnpricedTraffic(u)!;
    expect(d).toMatchObject({
      type: 'unpriced.traffic', severity: 'warning', scope: { kind: 'model', id: 'mystery-1' }, subject: {},
      observed: 1234, evidence: { requests: 1234 },
    });
    expect(d.summary).toBe('1,234 requests to mystery-1 from 2025-03-10 13:00 to 14:00 UTC had no price, so their cost is unknown.');
    const one = detectUnpricedTraffic(changed(u, { requests: 1 }))!;
    for (const text of [d.title, d.summary, one.title, one.summary]) expect(text).not.toContain('$');
  });

  it('does not fire on no requests', () => {
    expect(detectUnpricedTraffic(changed(u, { requests: 0 }))).toBeNull();
  });

  it('raises nothing over four weeks of seasonal hours where every model is priced', () => {
    const windows = SEASONAL.map((h) => ({ orgId: ORG, model: 'gpt-4o', from: h.hour, to: new Date(h.hour.getTime() + HOUR_MS), requests: 0 }));
    expect(windows.map(detectUnpricedTraffic).filter((d) => d !== null)).toEqual([]);
  });
});

describe('model changed', () => {
  const from = new Date('2025-03-10T13:00:00Z');
  const to = new Date('2025-03-10T14:00:00Z');

  it('warns once per newly serving model, with the route and served model as the subject', () => {
    const ds = detectModelChanged({
      orgId: ORG, asked: { kind: 'route', id: 'support' }, from, to, current: { 'gpt-4o': 500, 'claude-3-5': 120, 'gemini-2': 3 },
      trailing: ['gpt-4o'], hasHistory: true,
    });
    expect(ds.map((d) => d.subject)).toEqual([{ route: 'support', model: 'claude-3-5' }, { route: 'support', model: 'gemini-2' }]);
    expect(ds[0]).toMatchObject({
      type: 'traffic.model_changed', severity: 'warning', scope: { kind: 'organization', id: ORG }, observed: 120,
      evidence: { asked_kind: 'route', asked: 'support', served: 'claude-3-5', requests: 120, previously_served: ['gpt-4o'] },
    });
    expect(ds[0]!.summary).toBe('claude-3-5 answered 120 requests for route support from 2025-03-10 13:00 to 14:00 UTC; '
      + 'only gpt-4o served it in the previous seven days.');
  });

  it('keys an asked model by the served model, with the asked one in the evidence', () => {
    const [d] = detectModelChanged({
      orgId: ORG, asked: { kind: 'model', id: 'gpt-4o' }, from, to, current: { 'gpt-4o-mini': 40 }, trailing: ['gpt-4o'], hasHistory: true,
    });
    expect(d).toMatchObject({ subject: { model: 'gpt-4o-mini' }, evidence: { asked_kind: 'model', asked: 'gpt-4o', served: 'gpt-4o-mini' } });
  });

  it('says nothing without a trailing week, for models served before, or for zero requests', () => {
    const s: ServedModels = { orgId: ORG, asked: { kind: 'route', id: 'support' }, from, to, current: { 'claude-3-5': 120 }, trailing: [], hasHistory: false };
    expect(detectModelChanged(s)).toEqual([]);
    expect(detectModelChanged(changed(s, { hasHistory: true, trailing: ['claude-3-5'] }))).toEqual([]);
    expect(detectModelChanged(changed(s, { hasHistory: true, current: { 'claude-3-5': 0 } }))).toEqual([]);
  });

  it('raises nothing over the last week of seasonal traffic split between a primary and its usual fallback', () => {
    const random = prng(3);
    for (let day = 0; day < 7; day++) {
      const start = LAST_HOUR - (day + 1) * DAY_MS;
      const requests = SEASONAL.filter((h) => h.hour.getTime() >= start && h.hour.getTime() < start + DAY_MS).reduce((n, h) => n + h.requests, 0);
      const fallback = Math.round(requests * 0.1 * random());
      const current = { 'gpt-4o': requests - fallback, 'gpt-4o-mini': fallback };
      expect(detectModelChanged({
        orgId: ORG, asked: { kind: 'route', id: 'support' }, from: new Date(start), to: new Date(start + DAY_MS), current,
        trailing: ['gpt-4o-mini', 'gpt-4o'], hasHistory: true,
      })).toEqual([]);
    }
  });
});

describe('answered model mismatch', () => {
  const m = {
    orgId: ORG, connectionId: 'conn_1', asked: 'gpt-4o', answered: 'gpt-4o-2024-11-20', requests: 80,
    from: new Date('2025-03-10T13:00:00Z'), to: new Date('2025-03-10T14:00:00Z'),
  };

  it('notes a connection answering with another model than asked', () => {
    expect(detectAnsweredMismatch(m)).toMatchObject({
      type: 'traffic.model_changed', severity: 'info', scope: { kind: 'connection', id: 'conn_1' }, subject: { model: 'gpt-4o' },
      observed: 80, evidence: { asked: 'gpt-4o', answered: 'gpt-4o-2024-11-20', requests: 80 },
    });
  });

  it('does not fire when the answer names the asked model, or on no requests', () => {
    expect(detectAnsweredMismatch(changed(m, { answered: 'gpt-4o' }))).toBeNull();
    expect(detectAnsweredMismatch(changed(m, { requests: 0 }))).toBeNull();
  });

  it('raises nothing over four weeks of seasonal hours answered as asked', () => {
    const hourly = SEASONAL.map((h) => detectAnsweredMismatch(changed(m, { answered: 'gpt-4o', requests: h.requests, from: h.hour })));
    expect(hourly.filter((d) => d !== null)).toEqual([]);
  });
});

describe('traffic regression', () => {
  const w: LatencyWindow = {
    orgId: ORG, model: 'gpt-4o', connectionId: 'conn_1', from: new Date('2025-03-10T13:00:00Z'), to: new Date('2025-03-10T14:00:00Z'),
    current: { requests: 1000, p95Ms: 2400, errorRate: 0.02 }, trailing: { requests: 20000, p95Ms: 900, errorRate: 0.02 },
  };

  it('fires when p95 at least doubles and rises by 500 ms', () => {
    const d = detectRegression(w)!;
    expect(d).toMatchObject({
      type: 'traffic.regression', severity: 'warning', scope: { kind: 'connection', id: 'conn_1' }, subject: { model: 'gpt-4o' },
      observed: 2400, expected: 900, threshold: 1800,
      evidence: {
        current: { requests: 1000, p95_ms: 2400, error_rate: 0.02 }, trailing: { requests: 20000, p95_ms: 900, error_rate: 0.02 },
        latency_regressed: true, errors_regressed: false,
      },
    });
    expect(d.summary).toBe('gpt-4o on connection conn_1 from 2025-03-10 13:00 to 14:00 UTC (1,000 requests): '
      + 'p95 latency 2,400 ms against 900 ms in the trailing window.');
  });

  it('fires on an error rate ten points up, observing the error rate when latency held', () => {
    const d = detectRegression(changed(w, { current: { requests: 1000, p95Ms: 950, errorRate: 0.15 }, trailing: { requests: 20000, p95Ms: 900, errorRate: 0.05 } }))!;
    expect(d).toMatchObject({ observed: 0.15, expected: 0.05, evidence: { latency_regressed: false, errors_regressed: true } });
    expect(d.threshold).toBeCloseTo(0.15, 12);
    expect(d.title).toBe('Error rate regression on gpt-4o via conn_1');
  });

  it('does not fire when p95 doubles by less than 500 ms, on a 9-point rise, or on 49 requests either side', () => {
    const fast = { requests: 1000, p95Ms: 300, errorRate: 0.02 };
    expect(detectRegression(changed(w, { current: changed(fast, { p95Ms: 700 }), trailing: fast }))).toBeNull();
    expect(detectRegression(changed(w, { current: { requests: 1000, p95Ms: 1700, errorRate: 0.02 } }))).toBeNull();
    expect(detectRegression(changed(w, { current: { requests: 1000, p95Ms: 900, errorRate: 0.11 } }))).toBeNull();
    expect(detectRegression(changed(w, { current: { requests: 49, p95Ms: 2400, errorRate: 0.5 } }))).toBeNull();
    expect(detectRegression(changed(w, { trailing: { requests: 49, p95Ms: 900, errorRate: 0.02 } }))).toBeNull();
  });

  it('raises nothing over the last week of seasonal hours against the week before', () => {
    const random = prng(17);
    const stats = (h: HourlySpend) => ({
      requests: h.requests,
      // Busier hours are a little slower; ±15% noise on top.
      p95Ms: 800 * (1 + 0.3 * (h.cost / 8)) * noise(random),
      errorRate: 0.02 * noise(random),
    });
    const trailing = { requests: 0, p95Ms: 0, errorRate: 0 };
    const before = SEASONAL.filter((h) => h.hour.getTime() >= LAST_HOUR - 14 * DAY_MS && h.hour.getTime() < LAST_HOUR - 7 * DAY_MS).map(stats);
    trailing.requests = before.reduce((n, s) => n + s.requests, 0);
    trailing.p95Ms = median(before.map((s) => s.p95Ms));
    trailing.errorRate = before.reduce((sum, s) => sum + s.errorRate * s.requests, 0) / trailing.requests;
    const found = SEASONAL.filter((h) => h.hour.getTime() >= LAST_HOUR - 7 * DAY_MS && h.hour.getTime() < LAST_HOUR).map((h) => detectRegression({
      orgId: ORG, model: 'gpt-4o', connectionId: 'conn_1', from: h.hour, to: new Date(h.hour.getTime() + HOUR_MS), current: stats(h), trailing,
    }));
    expect(found.length).toBe(168);
    expect(found.filter((d) => d !== null)).toEqual([]);
  });
});
