import type { Client } from '@temporalio/client';

/**
 * What each still-open workflow among `ids` waits on: its pending activities (type, state,
 * attempt, last failure) and pending workflow task, one line each. A test that times out
 * waiting for runs to end prints this, so a CI log says where a run stood rather than only
 * that it had not ended.
 */
export async function describeOpenWorkflows(client: Client, ids: string[]): Promise<string> {
  const lines: string[] = [];
  for (const id of ids) {
    try {
      const description = await client.workflow.getHandle(id).describe();
      if (description.status.name !== 'RUNNING') continue;
      const raw = description.raw;
      const activities = (raw.pendingActivities ?? []).map((a) =>
        `${a.activityType?.name} state=${a.state} attempt=${a.attempt} lastFailure=${JSON.stringify(a.lastFailure?.message ?? null)} lastWorker=${a.lastWorkerIdentity ?? ''}`);
      const task = raw.pendingWorkflowTask ? `workflow task state=${raw.pendingWorkflowTask.state} attempt=${raw.pendingWorkflowTask.attempt}` : 'no workflow task';
      lines.push(`${id}: ${activities.length ? activities.join('; ') : 'no pending activity'}; ${task}; history events=${raw.workflowExecutionInfo?.historyLength ?? '?'}`);
    } catch (err) {
      lines.push(`${id}: describe failed: ${(err as Error).message}`);
    }
  }
  return lines.join('\n');
}

/** Runs `wait`; when it throws, the error carries what the still-open workflows wait on. */
export async function explainingOpenWorkflows<T>(client: Client, ids: string[], wait: () => Promise<T>): Promise<T> {
  try {
    return await wait();
  } catch (err) {
    const open = await describeOpenWorkflows(client, ids).catch((e: Error) => `(describe failed: ${e.message})`);
    (err as Error).message += `\nstill open:\n${open || '(none)'}`;
    throw err;
  }
}
