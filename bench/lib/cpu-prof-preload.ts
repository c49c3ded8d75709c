/**
 * Required into a subject (compiled by bench/lib/gateway.ts, `--require`) when BENCH_CPU_PROF is
 * set: profiles from start-up and writes the profile to BENCH_CPU_PROF_FILE on SIGUSR2, so the
 * bench decides when, not the exit.
 *
 * The API runs compiled (dist/api/server.js, one file); each frame in a file with a source map
 * beside it is written at its TypeScript source position, so bench/profile-summary.ts groups
 * the time by project file as it did under tsx. The mapping runs once, when the profile is
 * written: the subject runs without source maps, as production does.
 */
import fs from 'node:fs';
import inspector from 'node:inspector';
import { SourceMap } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

type CallFrame = { url: string; lineNumber: number; columnNumber: number };
type ProfileNode = { callFrame: CallFrame; positionTicks?: unknown };

const maps = new Map<string, SourceMap | null>();

/** The linked source map of a compiled file (`<file>.map`), or null for files without one. */
function sourceMapOf(url: string): SourceMap | null {
  if (!maps.has(url)) {
    let map: SourceMap | null = null;
    try {
      if (url.startsWith('file://')) map = new SourceMap(JSON.parse(fs.readFileSync(`${fileURLToPath(url)}.map`, 'utf8')));
    } catch {
      // No map beside it: node_modules, node: internals.
    }
    maps.set(url, map);
  }
  return maps.get(url)!;
}

/** Points each frame of a compiled file at its source (the map's paths are relative to the map). */
function mapToSources(nodes: ProfileNode[]): void {
  for (const node of nodes) {
    const frame = node.callFrame;
    const map = frame.lineNumber >= 0 ? sourceMapOf(frame.url) : null;
    const entry = map?.findEntry(frame.lineNumber, frame.columnNumber);
    if (!entry || !('originalSource' in entry)) continue;
    const source = path.resolve(path.dirname(fileURLToPath(frame.url)), entry.originalSource);
    node.callFrame = { ...frame, url: pathToFileURL(source).href, lineNumber: entry.originalLine, columnNumber: entry.originalColumn };
    // Line ticks count lines of the compiled file.
    delete node.positionTicks;
  }
}

const file = process.env.BENCH_CPU_PROF_FILE;
if (file) {
  const session = new inspector.Session();
  session.connect();
  session.post('Profiler.enable', () => session.post('Profiler.setSamplingInterval', { interval: 1000 }, () => session.post('Profiler.start')));
  process.on('SIGUSR2', () => {
    session.post('Profiler.stop', (err, result) => {
      if (err) return;
      mapToSources(result.profile.nodes as ProfileNode[]);
      fs.writeFileSync(file, JSON.stringify(result.profile));
    });
  });
}
