import { runWorkerProcess } from './main';

void runWorkerProcess(['maintenance']);
