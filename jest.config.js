/** Tests run against real Postgres, Redis and a Temporal dev server that globalSetup starts. */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: {
    '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022' } }],
    // The OpenAPI validator's reference parser ships only as ES modules; compile it for Jest.
    '^.+/@apidevtools/json-schema-ref-parser/.+\\.js$': ['@swc/jest', { jsc: { target: 'es2022' }, module: { type: 'commonjs' } }],
  },
  transformIgnorePatterns: ['/node_modules/(?!@apidevtools/json-schema-ref-parser/)'],
  globalSetup: '<rootDir>/test/helpers/global-setup.ts',
  globalTeardown: '<rootDir>/test/helpers/global-teardown.ts',
  // Two cores: two workers keep the Temporal server and Postgres responsive.
  maxWorkers: 2,
  testTimeout: 60000,
};
