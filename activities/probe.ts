export type ProbeDeps = { taskQueue: string };

/** Answers probeWorkflow, naming the queue whose worker served it. */
export function createProbeActivities(deps: ProbeDeps) {
  return {
    async echo(message: string): Promise<{ message: string; handledBy: string }> {
      return { message, handledBy: deps.taskQueue };
    },
  };
}

export type ProbeActivities = ReturnType<typeof createProbeActivities>;
