/**
 * Loaded into a subject with `--import` when BENCH_CPU_PROF is set: profiles from start-up and
 * writes the profile to BENCH_CPU_PROF_FILE on SIGUSR2, so the bench decides when, not the exit.
 */
import fs from 'node:fs';
import inspector from 'node:inspector';

const file = process.env.BENCH_CPU_PROF_FILE;
if (file) {
  const session = new inspector.Session();
  session.connect();
  session.post('Profiler.enable', () => session.post('Profiler.setSamplingInterval', { interval: 1000 }, () => session.post('Profiler.start')));
  process.on('SIGUSR2', () => {
    session.post('Profiler.stop', (err, result) => {
      if (!err) fs.writeFileSync(file, JSON.stringify(result.profile));
    });
  });
}
