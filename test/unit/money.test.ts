import { roundDollars, sumNanos, toDollars, toNanos } from '../../core/spend/money';

describe('money in nano-dollars (DESIGN 6.5)', () => {
  it('sums a million requests of $0.0000045 to exactly $4.50', () => {
    const costs = Array.from({ length: 1_000_000 }, () => toNanos(0.0000045));
    expect(costs[0]).toBe(4500);
    const total = sumNanos(costs);
    expect(total).toBe(4_500_000_000n);
    expect(toDollars(total)).toBe(4.5);
    // Floating dollars drift where nano-dollars do not.
    let floating = 0;
    for (let i = 0; i < 1_000_000; i++) floating += 0.0000045;
    expect(floating).not.toBe(4.5);
  });

  it('keeps a cheap request\'s cost: micro-dollars would round $0.0000045 to $0.000005', () => {
    expect(toDollars(toNanos(0.0000045))).toBe(0.0000045);
    expect(roundDollars(0.1 + 0.2)).toBe(0.3);
  });

  it('reads the decimal strings Redis and Postgres answer, and stays exact past 2^53 nanos', () => {
    expect(toDollars('1500000000')).toBe(1.5);
    expect(toDollars('-250000000')).toBe(-0.25);
    expect(toDollars(null)).toBe(0);
    const big = sumNanos(['9007199254740993', '7']);
    expect(big).toBe(9_007_199_254_741_000n);
    expect(toDollars(big)).toBeCloseTo(9_007_199.254741, 6);
    expect(toNanos(1_000_000_000)).toBe(1e18);
    expect(toNanos(-0.5)).toBe(-500_000_000);
  });

  it('converts nano-dollars to the double nearest the exact amount, once (issue 33)', () => {
    expect(toDollars(11_771_765_394)).toBe(11.771765394);
    expect(String(toDollars('11771765394'))).toBe('11.771765394');
    expect(toDollars(-11_771_765_394n)).toBe(-11.771765394);
    expect(toDollars(7)).toBe(0.000000007);
    expect(toDollars(-7)).toBe(-0.000000007);
    // Every amount is the double JavaScript reads from its exact decimal text, over many amounts.
    for (let n = 1n; n < 10n ** 15n; n = n * 7n + 3n) {
      const text = `${n / 1_000_000_000n}.${(n % 1_000_000_000n).toString().padStart(9, '0')}`;
      expect([n, toDollars(n)]).toEqual([n, Number(text)]);
    }
  });
});
