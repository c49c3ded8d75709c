import { runWorkerProcess } from './main';

void runWorkerProcess(['jobs']);
