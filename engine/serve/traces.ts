/**
 * `[telemetry]`: OpenTelemetry traces of a run, sent to an OTLP/HTTP collector through the
 * official SDK. It is a reporter, as [notify] and the live board are: it sees each event
 * the engine appended and turns it into spans later, on its own turn of the event loop
 * (trace-spans.ts says which spans); the SDK's batch processor exports them in the
 * background. Nothing it meets — a collector that is down, that hangs, that refuses — is
 * thrown into the engine or holds up a step; at the run's end `close` waits for the export
 * a bounded time (`[telemetry] timeout`), then lets go.
 */
import { type Clock, systemClock } from '../os/clock.ts';
import { basename } from 'node:path';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import { InputError } from '../core/errors.ts';
import type { TronEvent } from '../core/events.ts';
import type { TelemetryConfig } from '../project/config.ts';
import { SpanBook } from './trace-spans.ts';

/** The variables OpenTelemetry's own SDKs read: a base URL (`/v1/traces` is added), or the traces URL itself. */
export const OTLP_ENDPOINT_ENV = 'OTEL_EXPORTER_OTLP_ENDPOINT';
export const OTLP_TRACES_ENDPOINT_ENV = 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT';
const HTTP_URL = /^https?:\/\/\S+$/;
const DEFAULT_TIMEOUT_MS = 5000;

/**
 * Where the run's traces go, read once at the start: `[telemetry] otlp_endpoint`, else
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (as it is), else OTEL_EXPORTER_OTLP_ENDPOINT; none:
 * no traces. A variable that is set but is no http(s) URL is an input error (exit 2).
 */
export function tracesTarget(
  telemetry: TelemetryConfig | undefined,
  env: Readonly<Record<string, string | undefined>>,
): { url: string; timeoutMs: number } | undefined {
  const timeoutMs = telemetry?.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  for (const name of [OTLP_TRACES_ENDPOINT_ENV, OTLP_ENDPOINT_ENV]) {
    const value = env[name]?.trim();
    if (value && !HTTP_URL.test(value))
      throw new InputError([
        {
          code: 'TRON_USAGE',
          path: name,
          message: `an http(s) URL of an OTLP/HTTP collector, e.g. http://127.0.0.1:4318 (or unset, for [telemetry] otlp_endpoint in .tron/config.toml, or no traces)`,
        },
      ]);
  }
  if (telemetry?.otlpEndpoint) return { url: tracesUrl(telemetry.otlpEndpoint), timeoutMs };
  const full = env[OTLP_TRACES_ENDPOINT_ENV]?.trim();
  if (full) return { url: full, timeoutMs };
  const base = env[OTLP_ENDPOINT_ENV]?.trim();
  return base ? { url: tracesUrl(base), timeoutMs } : undefined;
}

function tracesUrl(base: string): string {
  return `${base.replace(/\/+$/, '')}/v1/traces`;
}

export interface TraceReporterOptions {
  /** The collector's traces URL (tracesTarget). */
  url: string;
  timeoutMs: number;
  repo: string;
  version: string;
  /** Times the close's bound (the system's by default): the engine's clock. */
  clock?: Clock;
}

export class TraceReporter {
  private readonly provider: BasicTracerProvider;
  private readonly book: SpanBook;
  private readonly queue: TronEvent[] = [];
  private scheduled = false;

  constructor(private readonly o: TraceReporterOptions) {
    const exporter = new OTLPTraceExporter({ url: o.url, timeoutMillis: o.timeoutMs });
    this.provider = new BasicTracerProvider({
      resource: resourceFromAttributes({
        [ATTR_SERVICE_NAME]: 'tron',
        [ATTR_SERVICE_VERSION]: o.version,
        'tron.repository': basename(o.repo),
      }),
      spanProcessors: [new BatchSpanProcessor(exporter, { exportTimeoutMillis: o.timeoutMs })],
    });
    this.book = new SpanBook(this.provider.getTracer('tron', o.version));
  }

  /** Sees an appended event; never throws, never waits: the spans are made on a later turn of the loop. */
  event(e: TronEvent): void {
    this.queue.push(e);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.drain());
  }

  /** Ends what is still open, then waits for the export at most `timeoutMs`; never throws. */
  async close(): Promise<void> {
    this.drain();
    try {
      this.book.close();
    } catch {
      // A trace is never worth a run.
    }
    let cancel: (() => void) | undefined;
    const bound = new Promise<void>((r) => {
      // Ref'd: the run's end waits for the export, or this bound.
      cancel = (this.o.clock ?? systemClock).after(this.o.timeoutMs, r, { keepAlive: true });
    });
    const flushed = this.provider
      .forceFlush()
      .then(() => this.provider.shutdown())
      .catch(() => undefined);
    await Promise.race([flushed, bound]).finally(() => cancel?.());
  }

  private drain(): void {
    this.scheduled = false;
    for (const e of this.queue.splice(0)) {
      try {
        this.book.see(e);
      } catch {
        // A trace is never worth a run.
      }
    }
  }
}
