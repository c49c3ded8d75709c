/** Every workflow the workers register. Deterministic code only. */
export { probeWorkflow } from './probe';
