/**
 * The finding detectors (DESIGN 4b): pure functions from numbers a caller gathered to
 * detections the store records. No I/O and no clock; time comes in as arguments.
 */
export * from './connection-failing';
export * from './cost-drift';
export * from './forecast-over-budget';
export * from './model-changed';
export * from './robust';
export * from './spend-anomaly';
export * from './threshold-crossed';
export * from './traffic-regression';
export * from './unpriced-traffic';
