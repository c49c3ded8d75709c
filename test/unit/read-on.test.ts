import { READ_ON_PER_ORG, readingOn, readOnSlot } from '../../core/chat/read-on';

/**
 * Streams read on after their client left are capped per organization (issue 54): each holds a
 * pooled upstream socket the tenants share.
 */
describe('streams read on after their client left', () => {
  it('gives an organization READ_ON_PER_ORG slots, then none, and takes each back once', () => {
    const releases = Array.from({ length: READ_ON_PER_ORG }, () => readOnSlot('org_a'));
    expect(releases.every((r) => r !== null)).toBe(true);
    expect(readOnSlot('org_a')).toBeNull();
    // Another organization is not held back by the first's streams.
    const other = readOnSlot('org_b');
    expect(other).not.toBeNull();
    releases[0]!();
    releases[0]!();
    expect(readingOn('org_a')).toBe(READ_ON_PER_ORG - 1);
    const again = readOnSlot('org_a');
    expect(again).not.toBeNull();
    for (const release of [...releases.slice(1), again, other]) release!();
    expect([readingOn('org_a'), readingOn('org_b')]).toEqual([0, 0]);
  });
});
