/** Tests run against real Postgres, Redis and a Temporal dev server that globalSetup starts. */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022' } }] },
  globalSetup: '<rootDir>/test/helpers/global-setup.ts',
  globalTeardown: '<rootDir>/test/helpers/global-teardown.ts',
  // Two cores: two workers keep the Temporal server and Postgres responsive.
  maxWorkers: 2,
  testTimeout: 60000,
};
