import { runWorkerProcess } from './main';

void runWorkerProcess(['webhooks']);
