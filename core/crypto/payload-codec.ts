import { defaultPayloadConverter, type DataConverter, type FailureConverter, type LoadedDataConverter, type Payload, type PayloadCodec } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { createSealer, type SealBinding, type Sealer } from './sealing';

/**
 * Workflow and activity payloads sealed before they leave the process (issue 34): a video
 * job's input carries the prompt, and Temporal's history would otherwise keep it readable to
 * anyone with access to the Temporal server, its database or its UI. Each payload, serialized
 * whole (metadata and data), is sealed with the gateway's sealing keys (GW_SEALING_KEYS, the
 * same AES-256-GCM sealing as provider credentials, bound to its own purpose), so key rotation
 * works as it does for every sealed field: new payloads take the current key, old ones open
 * with the key they name. A payload without this encoding (written before sealing was on, by a
 * client without the codec) passes through as it is, so open runs and kept histories still read.
 *
 * The Temporal UI and CLI show sealed payloads as `binary/gw-sealed`; the API's codec endpoint
 * (api/temporal-codec.ts) opens them for an operator.
 */
export const SEALED_PAYLOAD_ENCODING = 'binary/gw-sealed';

/** The associated data of a sealed payload: not a field of any tenant's record. */
const PAYLOAD_BINDING: SealBinding = { orgId: '', recordId: 'temporal', field: 'payload' };

const utf8 = new TextEncoder();
const text = new TextDecoder();
const ENCODING = utf8.encode(SEALED_PAYLOAD_ENCODING);
const { Payload: PayloadMessage } = temporal.api.common.v1;

function isSealed(payload: Payload): boolean {
  const encoding = payload.metadata?.encoding;
  return encoding !== undefined && encoding !== null && text.decode(encoding) === SEALED_PAYLOAD_ENCODING;
}

export function sealingPayloadCodec(sealer: Sealer): PayloadCodec {
  return {
    async encode(payloads: Payload[]): Promise<Payload[]> {
      return payloads.map((payload) => {
        const whole = Buffer.from(PayloadMessage.encode(payload).finish()).toString('base64');
        return { metadata: { encoding: ENCODING, 'gw-key-version': utf8.encode(String(sealer.currentVersion)) }, data: utf8.encode(sealer.seal(whole, PAYLOAD_BINDING)) };
      });
    },
    async decode(payloads: Payload[]): Promise<Payload[]> {
      return payloads.map((payload) => {
        if (!isSealed(payload)) return payload;
        const whole = Buffer.from(sealer.open(text.decode(payload.data ?? new Uint8Array()), PAYLOAD_BINDING), 'base64');
        return PayloadMessage.decode(whole) as Payload;
      });
    },
  };
}

/**
 * The data converter of every Temporal client of the gateway: payloads sealed, and failures'
 * messages and stack traces carried in a payload (`core/crypto/failure-converter.cjs`), so sealed
 * as well. Given loaded, so a client needs no file path (in dist/ the API is one bundled file).
 */
export function sealingDataConverter(keyring: string): LoadedDataConverter {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { failureConverter } = require('./failure-converter.cjs') as { failureConverter: FailureConverter };
  return { payloadConverter: defaultPayloadConverter, failureConverter, payloadCodecs: [sealingPayloadCodec(createSealer(keyring))] };
}

/**
 * A worker's: the same, with the failure converter named by path (`failureConverterPath`), the
 * one way a worker and its workflow bundle take one.
 */
export function sealingWorkerDataConverter(keyring: string, failureConverterPath: string): DataConverter {
  return { payloadCodecs: [sealingPayloadCodec(createSealer(keyring))], failureConverterPath };
}
