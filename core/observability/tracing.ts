import { context, ROOT_CONTEXT, SpanKind, trace, TraceFlags, type Attributes, type Context, type ContextManager, type Link, type Tracer } from '@opentelemetry/api';
import { DEFAULT_ENVIRONMENT, parseEnvironment, TracesSamplerValues } from '@opentelemetry/core';
import { OTLPTraceExporter as OTLPJsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { detectResourcesSync, envDetectorSync, Resource } from '@opentelemetry/resources';
import {
  AlwaysOffSampler, AlwaysOnSampler, BatchSpanProcessor, ConsoleSpanExporter, ParentBasedSampler, SamplingDecision, TraceIdRatioBasedSampler,
  type Sampler, type SpanExporter, type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { ConfigError } from '../config';
import { otlpJsonSpans } from './otlp-json-spans';
import { otlpProtoSpans } from './otlp-proto-spans';
import { batchSettings, consoleBatchExport, fanOutSpans, RecordedSpan, SpanRecorder, type SpanSink } from './span-recorder';

/**
 * OpenTelemetry traces of a gateway process (issue 36), configured by the standard `OTEL_*`
 * environment variables and nothing else: `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`)
 * turns export on over OTLP/HTTP, protobuf or (`OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL=http/json`)
 * JSON, for the gateway's own request spans (span-recorder.ts) as for the SDK's; `OTEL_TRACES_EXPORTER` may say `otlp`, `console` or `none`; `OTEL_SDK_DISABLED=true`
 * turns everything off; `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
 * `OTEL_TRACES_SAMPLER(_ARG)`, `OTEL_BSP_*` and the exporter's headers and timeouts are read by
 * the SDK itself, and for the request spans by the same SDK code or its parser (the sampler is
 * the SDK's, `requestSampler`; the batches `batchSettings`).
 *
 * With none of them set, no provider is registered and `processTracingSetup()` is undefined: no
 * tracing middleware is installed, the plan walker finds no `ctx.state.trace`, so the hot path
 * pays no span, no context switch and no exporter (the bench's "telemetry off" row).
 */

export type Tracing = {
  tracer: Tracer;
  /** The gateway's own request spans, recorded and exported without the SDK's span objects (span-recorder.ts). */
  recorder: SpanSink;
  /** Whether a request's spans are recorded, by `OTEL_TRACES_SAMPLER(_ARG)` and the caller's sampled flag. */
  sampled(parent: CallerTrace | undefined, traceId: string): boolean;
  /** For the Temporal workers' workflow-span sink, which exports through the same pipeline. */
  spanProcessor: SpanProcessor;
  resource: Resource;
  /** Exports what is queued, then stops. */
  shutdown(): Promise<void>;
};

let processTracing: Tracing | undefined;

/** The exporters `OTEL_*` asks for; empty when traces are off. */
export function configuredExporters(env: NodeJS.ProcessEnv = process.env): Array<'otlp' | 'console'> {
  if ((env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase() === 'true') return [];
  const named = (env.OTEL_TRACES_EXPORTER ?? '').split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);
  // Named twice is still one exporter: each named one gets a span processor and a recorder.
  if (named.length > 0) return [...new Set(named)].filter((n): n is 'otlp' | 'console' => n === 'otlp' || n === 'console');
  return env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ? ['otlp'] : [];
}

/**
 * Once per process, before anything traced starts: registers the tracer provider and the W3C
 * trace-context propagator when `OTEL_*` asks for traces. Returns undefined, and registers
 * nothing, when it does not.
 *
 * `context: 'async'` (workers, `npm start`) registers OpenTelemetry's AsyncLocalStorage context
 * manager: an activity's span stays current across its awaits, so a workflow it starts (a webhook
 * delivery) joins its trace. The API passes its request's trace explicitly instead
 * (`ctx.state.trace`) and takes `'sync'`: an AsyncLocalStorage once run keeps Node 20's promise
 * hooks on for every promise of the process, a cost every request would pay. Its one use of the
 * current context, Temporal's client interceptor reading it as a workflow start begins, is
 * synchronous (`withinTrace`).
 */
export function startTracing(serviceName: string, options: { context?: 'async' | 'sync'; env?: NodeJS.ProcessEnv } = {}): Tracing | undefined {
  const env = options.env ?? process.env;
  if (processTracing) return processTracing;
  const exporters = configuredExporters(env);
  if (exporters.length === 0) return undefined;
  // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (the env detector) win over the process's own name.
  const resource = Resource.default()
    .merge(new Resource({ 'service.name': serviceName }))
    .merge(detectResourcesSync({ detectors: [envDetectorSync] }));
  const processors = exporters.map((name) => new BatchSpanProcessor(exporterOf(name, env)));
  const provider = new NodeTracerProvider({ resource, spanProcessors: processors });
  provider.register(options.context === 'sync' ? { contextManager: new SyncContextManager() } : {});
  const spanProcessor = processors.length === 1 ? processors[0]! : fanOut(processors);
  // The request spans go where the SDK's do: OTLP in the configured protocol, the console as OTLP JSON lines.
  const batch = batchSettings(env);
  const recorders = exporters.map((name) => name === 'console'
    ? new SpanRecorder(resource, 'gateway', otlpJsonSpans, consoleBatchExport(), batch)
    : new SpanRecorder(resource, 'gateway', otlpProtocol(env) === 'http/json' ? otlpJsonSpans : otlpProtoSpans, undefined, batch));
  const recorder = recorders.length === 1 ? recorders[0]! : fanOutSpans(recorders);
  processTracing = {
    tracer: provider.getTracer('gateway'),
    recorder,
    sampled: requestSampler(env),
    spanProcessor,
    resource,
    async shutdown() {
      processTracing = undefined;
      await recorder.shutdown();
      await provider.shutdown();
    },
  };
  return processTracing;
}

/** The process's tracer when traces are on; undefined (and free to ask) when they are off. */
export function processTracer(): Tracer | undefined {
  return processTracing?.tracer;
}

export function processTracingSetup(): Tracing | undefined {
  return processTracing;
}

/** The OTLP protocol for traces, by `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL`; http/protobuf unless said otherwise. */
function otlpProtocol(env: NodeJS.ProcessEnv): 'http/protobuf' | 'http/json' {
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf').trim();
  if (protocol === 'http/protobuf' || protocol === 'http/json') return protocol;
  throw new ConfigError(`OTEL_EXPORTER_OTLP_PROTOCOL=${protocol} is not supported: use http/protobuf (the default) or http/json`);
}

function exporterOf(name: 'otlp' | 'console', env: NodeJS.ProcessEnv): SpanExporter {
  if (name === 'console') return new ConsoleSpanExporter();
  return otlpProtocol(env) === 'http/protobuf' ? new OTLPTraceExporter() : new OTLPJsonTraceExporter();
}

function fanOut(processors: SpanProcessor[]): SpanProcessor {
  return {
    onStart: (span, parent) => processors.forEach((p) => p.onStart(span, parent)),
    onEnd: (span) => processors.forEach((p) => p.onEnd(span)),
    forceFlush: async () => void (await Promise.all(processors.map((p) => p.forceFlush()))),
    shutdown: async () => void (await Promise.all(processors.map((p) => p.shutdown()))),
  };
}

/** A caller's W3C `traceparent`: its trace, the calling span, and whether the caller sampled it. */
export type CallerTrace = { traceId: string; spanId: string; sampled: boolean };

export function parseTraceparent(header: string | undefined): CallerTrace | undefined {
  if (!header) return undefined;
  const m = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})/.exec(header.trim());
  if (!m || m[1] === 'ff' || /^0+$/.test(m[2]!) || /^0+$/.test(m[3]!)) return undefined;
  return { traceId: m[2]!, spanId: m[3]!, sampled: (parseInt(m[4]!, 16) & 1) === 1 };
}

/** The W3C `traceparent` header's trace id, when the header is well formed (version 00 or later, non-zero ids). */
export function traceIdOfTraceparent(header: string | undefined): string | undefined {
  return parseTraceparent(header)?.traceId;
}

/**
 * Whether a request's spans are recorded, decided by the SDK's own sampler for
 * `OTEL_TRACES_SAMPLER(_ARG)` (`configuredSampler`) on the request's trace id and the caller's
 * span context (remote, with its sampled flag), as the SDK decides for a span it starts: the
 * request spans and Temporal's are sampled alike. Per request: the sampler's call, and a context
 * holding the caller's span when there is one.
 */
export function requestSampler(env: NodeJS.ProcessEnv): (parent: CallerTrace | undefined, traceId: string) => boolean {
  const sampler = configuredSampler(env);
  return (parent, traceId) => sampler.shouldSample(parent ? callerContext(parent) : ROOT_CONTEXT, traceId, '', SpanKind.SERVER, NO_ATTRIBUTES, NO_LINKS).decision === SamplingDecision.RECORD_AND_SAMPLED;
}

const NO_ATTRIBUTES: Attributes = Object.freeze({});
const NO_LINKS: Link[] = [];

function callerContext(parent: CallerTrace): Context {
  return trace.setSpanContext(ROOT_CONTEXT, { traceId: parent.traceId, spanId: parent.spanId, traceFlags: parent.sampled ? TraceFlags.SAMPLED : TraceFlags.NONE, isRemote: true });
}

/**
 * The SDK's sampler for `OTEL_TRACES_SAMPLER(_ARG)`, chosen as sdk-trace-base 1.x chooses the
 * provider's (its `buildSamplerFromEnv`, which it does not export), from the variables as its
 * parser reads them: the names exactly (`always_on`, `always_off`, `traceidratio` and their
 * `parentbased_` forms; `parentbased_always_on` by default), an unknown name `always_on`, and a
 * ratio that is missing, not a number or outside [0, 1] taken as 1. test/unit/span-recorder.test.ts
 * holds it to the provider's decisions.
 */
export function configuredSampler(env: NodeJS.ProcessEnv): Sampler {
  const read = Object.assign({}, DEFAULT_ENVIRONMENT, parseEnvironment(env as Record<string, string>));
  switch (read.OTEL_TRACES_SAMPLER) {
    case TracesSamplerValues.AlwaysOn:
      return new AlwaysOnSampler();
    case TracesSamplerValues.AlwaysOff:
      return new AlwaysOffSampler();
    case TracesSamplerValues.ParentBasedAlwaysOn:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case TracesSamplerValues.ParentBasedAlwaysOff:
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case TracesSamplerValues.TraceIdRatio:
      return new TraceIdRatioBasedSampler(samplerRatio(read.OTEL_TRACES_SAMPLER_ARG));
    case TracesSamplerValues.ParentBasedTraceIdRatio:
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(samplerRatio(read.OTEL_TRACES_SAMPLER_ARG)) });
    default:
      return new AlwaysOnSampler();
  }
}

/** `OTEL_TRACES_SAMPLER_ARG` as the SDK takes it: 1 unless a number in [0, 1]. */
function samplerRatio(arg: string | undefined): number {
  if (arg === undefined || arg === '') return 1;
  const ratio = Number(arg);
  return Number.isNaN(ratio) || ratio < 0 || ratio > 1 ? 1 : ratio;
}

/**
 * What a traced gateway request carries (`ctx.state.trace`): its server span, and the served
 * attempts' client spans that stay open until the request-log row says how the call ended (a
 * stream's usage and model are known only then). Unsampled, its spans record nothing but still
 * have ids, which a workflow start carries on.
 */
export class RequestTrace {
  private readonly open: Array<{ connectionId: string; span: RecordedSpan }> = [];
  private made: Context | undefined;
  /**
   * Whether the request's spans are recorded (it was sampled). When not, the request's steps
   * make no spans, events or attributes at all: the trace is only its ids, for the answer's
   * header, the row and a workflow started in it. Work done per request, between its own
   * steps, costs several times its cost in a loop (bench/results/2026-11-27-issue-36-traces.md).
   */
  readonly recording: boolean;

  constructor(readonly server: RecordedSpan, readonly operation: string, private readonly recorder: SpanSink | null) {
    this.recording = recorder !== null;
  }

  /** The server span as an OpenTelemetry context: what SDK-made children (a workflow start) are made in. */
  get context(): Context {
    return (this.made ??= trace.setSpanContext(ROOT_CONTEXT, this.server.spanContext()));
  }

  /** A child span of the server span (an upstream attempt). */
  child(name: string, kind: number, attributes: Attributes): RecordedSpan {
    return new RecordedSpan(this.recorder, this.server.traceId, this.server.spanId, name, kind, attributes);
  }

  /** A served attempt's span, ended by `endServed` with what the call produced. */
  keepOpen(connectionId: string, span: RecordedSpan): void {
    this.open.push({ connectionId, span });
  }

  /** The open served span of this connection (the oldest, should a request call it twice). */
  takeServed(connectionId: string | null | undefined): RecordedSpan | undefined {
    const at = this.open.findIndex((o) => o.connectionId === connectionId);
    return at < 0 ? undefined : this.open.splice(at, 1)[0]!.span;
  }

  /** Whatever no row ended (a request that threw after serving) ends with the request. */
  endAll(): void {
    for (const o of this.open.splice(0)) o.span.end();
  }
}

/**
 * Adds an event (cache, guardrails, spend hold) to a traced request's server span. Callers check
 * `ctx.state.trace?.recording` first, so an untraced or unsampled request builds no attributes.
 */
export function traceEvent(rt: RequestTrace, name: string, attributes: Record<string, string | number | boolean>): void {
  rt.server.addEvent(name, attributes);
}

/** Runs `fn` with the request's server span current (for code that reads the current context as it starts), or just runs it. */
export function withinTrace<T>(rt: RequestTrace | undefined, fn: () => T): T {
  return rt ? context.with(rt.context, fn) : fn();
}

/**
 * A context manager for code that reads the current context only synchronously, under `with`:
 * nothing carries across an await, so no async hook is ever installed.
 */
class SyncContextManager implements ContextManager {
  private current: Context = ROOT_CONTEXT;

  active(): Context {
    return this.current;
  }

  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(ctx: Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F> {
    const before = this.current;
    this.current = ctx;
    try {
      return fn.call(thisArg, ...args);
    } finally {
      this.current = before;
    }
  }

  bind<T>(ctx: Context, target: T): T {
    if (typeof target !== 'function') return target;
    const run = target as unknown as (...args: unknown[]) => unknown;
    const withContext = <R>(fn: () => R): R => this.with(ctx, fn);
    return function (this: unknown, ...args: unknown[]) {
      return withContext(() => run.apply(this, args));
    } as unknown as T;
  }

  enable(): this {
    return this;
  }

  disable(): this {
    this.current = ROOT_CONTEXT;
    return this;
  }
}
