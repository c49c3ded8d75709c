import { GatewayError } from '../../core/errors';

const QUOTED_VERSION = /^(?:W\/)?"(\d{1,15})"$/;

/** `If-Match: "<version>"` (spec 9.2). Missing and malformed are different 400s. */
export function parseIfMatch(header: string | undefined, required: boolean): number | null {
  if (header === undefined || header.trim() === '') {
    if (required) throw new GatewayError('if_match_required', 'This operation needs an If-Match header with the version you read, e.g. If-Match: "3".');
    return null;
  }
  const match = QUOTED_VERSION.exec(header.trim());
  if (!match) throw new GatewayError('invalid_if_match', 'If-Match must be a quoted version, e.g. If-Match: "3".');
  return Number(match[1]);
}

export function etag(version: number): string {
  return `"${version}"`;
}

export function versionConflict(current: number): GatewayError {
  return new GatewayError('version_conflict', `The resource changed since that version; it is now at version ${current}.`, {
    headers: { ETag: etag(current) },
  });
}
