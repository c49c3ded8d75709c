import fs from 'node:fs';
import path from 'node:path';
import { HISTORIES_DIR } from '../helpers/histories';

const WORKFLOWS_DIR = path.resolve(__dirname, '../../workflows');

type History = { events: Array<{ markerRecordedEventAttributes?: { markerName?: string; details?: Record<string, { payloads?: Array<{ data?: string }> }> } }> };

/** Patch ids recorded in a history's markers. */
function patchesOf(history: History): string[] {
  return history.events.flatMap((e) => {
    const marker = e.markerRecordedEventAttributes;
    if (marker?.markerName !== 'core_patch') return [];
    const data = marker.details?.['patch-data']?.payloads?.[0]?.data;
    return data ? [(JSON.parse(Buffer.from(data, 'base64').toString('utf8')) as { id: string }).id] : [];
  });
}

/** Each `patched(NAME)` of the workflow code, with the id its constant holds. */
function patchesInCode(): Array<{ name: string; id: string; file: string }> {
  const files = fs.readdirSync(WORKFLOWS_DIR).filter((f) => f.endsWith('.ts'));
  const source = Object.fromEntries(files.map((f) => [f, fs.readFileSync(path.join(WORKFLOWS_DIR, f), 'utf8')]));
  const all = Object.values(source).join('\n');
  return files.flatMap((file) => [...source[file]!.matchAll(/patched\(([A-Z_]+)\)/g)].map((m) => {
    const id = new RegExp(`export const ${m[1]} = '([^']+)'`).exec(all)?.[1];
    if (!id) throw new Error(`${file}: the constant ${m[1]} is not an exported string in workflows/`);
    return { name: m[1]!, id, file };
  }));
}

/**
 * What docs/operations.md says of test/replay/histories (issue 55, item 8): a recorded history of
 * every `patched()` branch, so both sides of every change replay. A patch whose marker no
 * history records (its new branch never replayed), or that every history of its workflow
 * records (its old branch never replayed), fails here.
 */
describe('the committed histories cover both sides of every patch', () => {
  const histories = fs.readdirSync(HISTORIES_DIR).filter((f) => f.endsWith('.json')).map((f) => ({ file: f, history: JSON.parse(fs.readFileSync(path.join(HISTORIES_DIR, f), 'utf8')) as History }));
  const typeOf = (h: History) => (h.events[0] as { workflowExecutionStartedEventAttributes?: { workflowType?: { name?: string } } }).workflowExecutionStartedEventAttributes?.workflowType?.name;
  const workflowOf: Record<string, string> = {
    'video-job.ts': 'videoJob', 'webhook-delivery.ts': 'webhookDelivery', 'findings-scan.ts': 'findingsScan', 'mcp-tool-sync.ts': 'mcpToolSync',
    'request-log-retention.ts': 'requestLogRetention', 'webhook-delivery-sweep.ts': 'webhookDeliverySweep',
  };

  it.each(patchesInCode().map((p) => [p.id, p] as const))('%s', (_id, patch) => {
    const type = workflowOf[patch.file];
    expect(type).toBeDefined();
    const ofType = histories.filter((h) => typeOf(h.history) === type);
    const withMarker = ofType.filter((h) => patchesOf(h.history).includes(patch.id)).map((h) => h.file);
    const without = ofType.filter((h) => !patchesOf(h.history).includes(patch.id)).map((h) => h.file);
    expect({ patch: patch.id, newBranch: withMarker.length > 0, oldBranch: without.length > 0 }).toEqual({ patch: patch.id, newBranch: true, oldBranch: true });
  });
});
