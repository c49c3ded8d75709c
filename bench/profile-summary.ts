/**
 * Where a subject's CPU went: self time of a `.cpuprofile` grouped by package (or by project
 * file), largest first. `npx tsx bench/profile-summary.ts <file.cpuprofile> [rows]`.
 */
import fs from 'node:fs';
import path from 'node:path';

type Node = { id: number; callFrame: { functionName: string; url: string }; children?: number[] };
type Profile = { nodes: Node[]; samples: number[]; timeDeltas: number[] };

const ROOT = path.resolve(__dirname, '..');

/** The group a frame's self time counts under. */
export function groupOf(url: string, functionName: string): string {
  if (!url) return functionName.startsWith('(') ? functionName : `(native) ${functionName || 'anonymous'}`;
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1]!;
  if (url.startsWith('node:')) return `node:${url.slice(5).split('/')[0] === 'internal' ? url.slice(5).split('/').slice(1, 3).join('/') : url.slice(5)}`;
  const file = url.replace(/^file:\/\//, '');
  return file.startsWith(ROOT) ? path.relative(ROOT, file) : file;
}

/** Self time by group; a native function's time goes to the first package or
 * project file up its stack (`writev <- pg`). */
export function summarize(profile: Profile): Array<{ group: string; ms: number; share: number }> {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, Node>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n);
  const caller = (node: Node): string => {
    for (let p = parent.get(node.id); p; p = parent.get(p.id)) {
      if (p.callFrame.url && !p.callFrame.url.startsWith('node:')) return groupOf(p.callFrame.url, p.callFrame.functionName);
    }
    return '?';
  };
  const totals = new Map<string, number>();
  let all = 0;
  profile.samples.forEach((id, i) => {
    const node = byId.get(id)!;
    const us = profile.timeDeltas[i] ?? 0;
    const { url, functionName } = node.callFrame;
    const group = !url && !functionName.startsWith('(') ? `${functionName || 'native'} <- ${caller(node)}` : groupOf(url, functionName);
    totals.set(group, (totals.get(group) ?? 0) + us);
    all += us;
  });
  return [...totals].map(([group, us]) => ({ group, ms: us / 1000, share: us / all })).sort((a, b) => b.ms - a.ms);
}

if (require.main === module) {
  const [file, rows] = process.argv.slice(2);
  if (!file) throw new Error('usage: profile-summary.ts <file.cpuprofile> [rows]');
  const summary = summarize(JSON.parse(fs.readFileSync(file, 'utf8')) as Profile);
  const idle = summary.find((s) => s.group === '(idle)');
  const busy = summary.filter((s) => s.group !== '(idle)').reduce((a, s) => a + s.ms, 0);
  console.log(`busy ${busy.toFixed(0)} ms, idle ${(idle?.ms ?? 0).toFixed(0)} ms; self time of the busy part:`);
  for (const s of summary.filter((s) => s.group !== '(idle)').slice(0, Number(rows ?? 25))) {
    console.log(`${((s.ms / busy) * 100).toFixed(1).padStart(5)} %  ${s.group}`);
  }
}
