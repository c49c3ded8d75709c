import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', '.data/', 'coverage/', 'migrations/meta/', 'dist/', 'dist.*/', 'console/dist/', 'scripts/.build.cjs'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // The files a chat request runs through. V8 (Node 20) builds an object literal that begins
    // with a spread by cloning, and the clone then gains each further property the slow way
    // (about a microsecond each, and garbage maps): docs/decisions.md. Spread last, or
    // Object.assign onto a new object.
    files: [
      'api/gateway/chat*.ts', 'api/gateway/spend-step.ts', 'api/gateway/stream-answer.ts', 'api/gateway/billed-usage.ts', 'api/gateway/cache-step.ts',
      'api/middleware/**/*.ts', 'core/chat/**/*.ts', 'core/spend/**/*.ts', 'core/providers/adapters/**/*.ts', 'core/providers/upstream.ts',
      'core/providers/kinds.ts', 'core/routing/**/*.ts', 'core/guardrails/**/*.ts', 'core/response-cache/**/*.ts', 'core/auth/**/*.ts',
      'core/ratelimit/**/*.ts', 'core/pricing/cost.ts', 'core/db/batch-writer.ts', 'core/request-log/**/*.ts', 'core/errors.ts', 'core/logger.ts',
    ],
    rules: {
      'no-restricted-syntax': ['error', {
        selector: 'ObjectExpression > SpreadElement:first-child:not(:last-child)',
        message: 'On the request path an object literal does not begin with a spread that more properties follow (V8 slow path): put the spread last, or Object.assign onto a new object.',
      }],
    },
  },
  {
    files: ['**/*.cjs', '**/*.js'],
    languageOptions: { sourceType: 'commonjs', globals: { require: 'readonly', module: 'writable', process: 'readonly', __dirname: 'readonly', console: 'readonly' } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
