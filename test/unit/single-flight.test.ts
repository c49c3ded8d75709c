import { createSingleFlight } from '../../core/single-flight';

describe('single flight (core/single-flight.ts)', () => {
  it('runs the work once for every caller of a key while it runs, and afresh after it ends or a clear', async () => {
    const flight = createSingleFlight<number>();
    let started = 0;
    let release!: () => void;
    const work = () => {
      started++;
      return new Promise<number>((resolve) => (release = () => resolve(started)));
    };
    const both = [flight.run('a', work), flight.run('a', work)];
    expect(started).toBe(1);
    release();
    expect(await Promise.all(both)).toEqual([1, 1]);
    // Ended: the next ask starts its own.
    const again = flight.run('a', work);
    expect(started).toBe(2);
    // Cleared while under way: a new ask starts too, and the old run's end does not remove it.
    const first = release;
    flight.clear();
    const fresh = flight.run('a', work);
    expect(started).toBe(3);
    first();
    await again;
    expect(flight.run('a', work)).toBe(fresh);
    release();
    expect(await fresh).toBe(3);
  });
});
