/** Every workflow the workers register. Deterministic code only. */
export { probeWorkflow } from './probe';
export { keyRotation } from './key-rotation';
export { secretRotation } from './secret-rotation';
export { videoJob } from './video-job';
export { webhookDelivery } from './webhook-delivery';
export { requestLogRetention } from './request-log-retention';
export { mcpToolSync } from './mcp-tool-sync';
export { webhookDeliverySweep } from './webhook-delivery-sweep';
export { findingsScan } from './findings-scan';
export { batchRun } from './batch-run';
