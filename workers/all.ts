import { runWorkerProcess } from './main';

/** Development: every queue in one process. Production runs the per-queue entries. */
void runWorkerProcess(['jobs', 'webhooks', 'maintenance']);
