/** Tests run against real Postgres, Redis and a Temporal dev server that globalSetup starts. */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  // test/cluster needs the Temporal cluster `npm run test:cluster` starts (jest.cluster.config.js).
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/cluster/'],
  transform: {
    '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022' } }],
    // Packages that ship only as ES modules (the OpenAPI validator's reference parser, the
    // models.dev catalog); compile them for Jest.
    '^.+/(@apidevtools/json-schema-ref-parser|@tokenlens)/.+\\.js$': ['@swc/jest', { jsc: { target: 'es2022' }, module: { type: 'commonjs' } }],
  },
  transformIgnorePatterns: ['/node_modules/(?!(@apidevtools/json-schema-ref-parser|@tokenlens)/)'],
  globalSetup: '<rootDir>/test/helpers/global-setup.ts',
  globalTeardown: '<rootDir>/test/helpers/global-teardown.ts',
  // Two cores: two workers keep the Temporal server and Postgres responsive.
  maxWorkers: 2,
  testTimeout: 60000,
};
