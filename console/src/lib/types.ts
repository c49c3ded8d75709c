/** The API's answers as the console reads them (the OpenAPI document at /manage/v1/openapi.json is the full contract). */
export type UsageBucket = {
  bucket_start: number; bucket_end: number; group?: Record<string, string | null>;
  requests: number; prompt_tokens: number; completion_tokens: number; total_tokens: number; cost: number; unpriced_requests: number;
};
export type UsageReport = { object: 'list'; bucket: 'hour' | 'day'; from: number; to: number; group_by: string[]; data: UsageBucket[]; totals: Omit<UsageBucket, 'bucket_start' | 'bucket_end' | 'group'> };
export type BudgetStatus = { scope: string; id: string; period: string; behavior: string; limit: number; spent: number; reserved: number; remaining: number };
export type Finding = {
  id: string; type: string; severity: string; status: string; title: string; summary: string; scope: { kind: string; id: string | null };
  observed: number | null; expected: number | null; evidence: Record<string, unknown>; first_seen_at: number; last_seen_at: number;
  acknowledged_at: number | null; resolved_at: number | null; occurrences: number;
};
export type Attempt = { connection_id: string; provider: string; model: string; position: string; outcome: string; failure_kind: string | null; status: number | null; latency_ms: number };
export type RequestLog = {
  id: string; created_at: number; endpoint: string; key_id: string; project_id: string; model: string | null; route: string | null; served_model: string | null;
  provider: string | null; connection_id: string | null; chain_position: string | null; status: number; error: { type: string; code: string | null } | null;
  stream: boolean; latency_ms: number; attempts: Attempt[]; usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
  estimated_cost: number | null; price_source: string | null; cache: { status: string | null; source_request_id: string | null };
  guardrails: { action: string; findings: Array<{ detector: string; stage: string; action: string; count: number }> } | null;
  metadata: { user_id: string | null; session_id: string | null; tags: Record<string, string> };
  allocation: { rule_id: string | null; rule_version_id: string | null; shares: Array<{ cost_center_id: string | null; percent: number; cost: number | null }> };
  trace_id: string | null; trace_url: string | null;
};
export type GatewayKey = {
  id: string; label: string; project_id: string; status?: string; disabled?: boolean; version: number; created_at: number; rate_limit_rpm?: number | null;
  credit_limit?: { amount: number; period: string } | null; [field: string]: unknown;
};
export type Job = {
  id: string; type: string; status: string; key_id: string; project_id: string; model: string; route: string | null; provider: string | null;
  connection: string | null; progress: number; created_at: number; started_at: number | null; completed_at: number | null;
  usage: { seconds: number; cost: number | null } | null; error: { message: string; type: string; code: string | null } | null;
};
export type JobDetail = Job & { status_checks: number; timeline: Array<{ at: number; event: string; detail: string }>; workflow: { id: string; url: string | null } };
export type RequestStats = { bucket_start: number; requests: number; errors: number; p50_latency_ms: number | null; p95_latency_ms: number | null; p50_added_ms: number | null; p95_added_ms: number | null };
export type Batch = {
  id: string; wire: 'openai' | 'anthropic'; endpoint: string; status: string; key_id: string; project_id: string;
  request_counts: { total: number; completed: number; failed: number; not_run: number }; progress: number; run_by: 'gateway' | 'provider'; cost: number; rerun_count: number;
  created_at: number; ended_at: number | null; expires_at: number;
};
export type BatchDetail = Batch & { errors: Array<{ code: string; message: string; param: string | null; line: number | null }> | null; workflow: { id: string; url: string | null } };
export type BatchItem = { line: number; custom_id: string; outcome: string; status_code: number | null; request_id: string | null; cost: number | null; attempts: number };
