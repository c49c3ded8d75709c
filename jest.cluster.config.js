/**
 * `npm run test:cluster` (issue 55): the job, webhook and rotation end-to-end tests, and the
 * cluster's own fault tests, against a Temporal cluster as operators deploy it (PostgreSQL,
 * frontend, matching, worker and two history processes; scripts/lib/temporal-cluster.ts)
 * instead of the dev server. One file at a time: the cluster's five processes share the two cores.
 */
const base = require('./jest.config');

process.env.GW_TEST_TEMPORAL = 'cluster';

module.exports = {
  ...base,
  testMatch: [
    '<rootDir>/test/cluster/**/*.test.ts',
    '<rootDir>/test/workflows/video-jobs.test.ts',
    '<rootDir>/test/workflows/webhook-deliveries.test.ts',
    '<rootDir>/test/workflows/key-rotation.test.ts',
    '<rootDir>/test/workflows/secret-rotation.test.ts',
  ],
  testPathIgnorePatterns: ['/node_modules/'],
  maxWorkers: 1,
};
