import type { ReactNode } from 'react';
import type { Read } from '../lib/use-read';
import { ApiError } from '../lib/api';

/** What a page shows while its read is on its way, or when the token may not read it. */
export function ReadState<T>({ read, what, children }: { read: Read<T>; what: string; children: (data: T) => ReactNode }) {
  if (read.error instanceof ApiError && read.error.forbidden) {
    return <p role="status" className="notice">This token may not read {what}: {read.error.message}</p>;
  }
  if (read.error) return <p role="alert" className="error">Could not read {what}: {read.error.message}</p>;
  if (read.loading || read.data === null) return <p role="status">Loading {what}…</p>;
  return <>{children(read.data)}</>;
}
