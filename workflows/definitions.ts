/**
 * Names shared by workflows, workers, the API and the launcher: task queues, search attributes,
 * workflow ids. Deterministic constants only; workflows import this file.
 */
export const TASK_QUEUES = {
  jobs: 'gw-jobs',
  webhooks: 'gw-webhooks',
  maintenance: 'gw-maintenance',
} as const;
export type TaskQueueName = keyof typeof TASK_QUEUES;

/** A deployment (or a test file) may prefix its queues to share one namespace with others. */
export function taskQueue(name: TaskQueueName, prefix = ''): string {
  return `${prefix}${TASK_QUEUES[name]}`;
}

/**
 * Search attributes our workflows set, so an operator can filter in the Temporal UI. The dev
 * launcher registers them when it starts the dev server; production registers them once with
 * `temporal operator search-attribute create`.
 */
export const SEARCH_ATTRIBUTES = {
  GwOrgId: 'Keyword',
  GwKeyId: 'Keyword',
  GwJobStatus: 'Keyword',
  GwModel: 'Keyword',
} as const;

export const workflowIds = {
  probe: (runId: string) => `probe_${runId}`,
};
