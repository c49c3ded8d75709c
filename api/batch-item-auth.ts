/**
 * A batch item's credentials, set on the request object by the in-process gateway
 * (api/in-process-gateway.ts) before the application sees it. A symbol, not a header: nothing
 * that arrives over a socket can carry it, so only a worker running a batch's items can act as
 * the batch's key, and only for requests it makes to itself.
 */
export const BATCH_ITEM_AUTH = Symbol('gw.batchItemAuth');

export type BatchItemAuth = {
  batchId: string;
  /** The SHA-256 of the batch key's secret, as stored: the key resolves as a request's would. */
  secretHash: string;
};

export function batchItemAuthOf(req: object): BatchItemAuth | undefined {
  return (req as { [BATCH_ITEM_AUTH]?: BatchItemAuth })[BATCH_ITEM_AUTH];
}
