export * from './organizations';
export * from './management-tokens';
export * from './projects';
export * from './gateway-keys';
