export * from './organizations';
export * from './management-tokens';
export * from './projects';
export * from './gateway-keys';
export * from './audit-events';
export * from './idempotency-records';
