"""`configure()`: one call to send toolwatch's spans somewhere, and to choose what content is captured."""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterable, Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Sampler

from instrumentation._content import SETTINGS, RedactHook, env_int, make_settings
from instrumentation._context import set_tracer_provider
from instrumentation._export import (
    DEFAULT_MAX_QUEUE_BYTES,
    DEFAULT_MAX_QUEUE_SIZE,
    DEFAULT_SHUTDOWN_TIMEOUT_MILLIS,
    CountingBatchSpanProcessor,
    CountingExporter,
    UnusableExporter,
)
from instrumentation._sdk_env import (
    GRPC_EXPORTER,
    GRPC_INSECURE_VARIABLES,
    SPAN_LIMITS,
    warn_timeout_in_millis,
    without_malformed,
)
from instrumentation._stats import STATS

logger = logging.getLogger(__name__)

ExporterName = Literal["otlp", "otlp-http", "otlp-grpc", "console", "memory", "none"]
_EXPORTERS = ("otlp", "otlp-http", "otlp-grpc", "console", "memory", "none")
# Milliseconds, as the OTEL_BSP_* variables. OpenTelemetry has no variable for it: OTEL_BSP_EXPORT_TIMEOUT bounds each
# export (and the Python SDK does not read it), OTEL_EXPORTER_OTLP_TIMEOUT each OTLP request with its retries.
ENV_SHUTDOWN_TIMEOUT = "TOOLWATCH_SHUTDOWN_TIMEOUT"
ENV_MAX_QUEUE_BYTES = "TOOLWATCH_MAX_QUEUE_BYTES"


class ToolwatchTracerProvider(TracerProvider):
    """The `TracerProvider` `configure()` returns, with its exporter and counters at hand."""

    exporter: SpanExporter | None = None
    """The exporter as chosen (e.g. the `InMemorySpanExporter` of `exporter="memory"`)."""
    processor: SpanProcessor | None = None

    def dropped_spans(self) -> int:
        """Spans lost so far (full queue or failed export), process-wide."""
        return STATS.dropped_spans


def configure_content(
    *,
    capture_content: bool | None = None,
    capture_turn_messages: bool | None = None,
    max_content_length: int | None = None,
    redact_keys: Iterable[str] | None = None,
    redact_pattern: str | re.Pattern[str] | None = None,
    redact_hook: RedactHook | None = None,
) -> None:
    """Change what content is recorded; None keeps the current value (initially from the environment).

    `capture_content`: tool arguments and results (default from
    `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`, off). `capture_turn_messages`: the turn's input and
    answer (default on, `TOOLWATCH_CAPTURE_TURN_MESSAGES`; off when the standard variable is set to a value that
    does not turn capture on, such as false or 0).
    `redact_keys` (case-insensitive names) and `redact_pattern` (a regex searched in key names) replace values at
    any depth (in mappings, dataclasses and models) with `[REDACTED]`; `redact_hook(tool_name, arguments)` returns
    the arguments to record (if it raises, none are). The hook gets a copy as plain data (dicts, lists, strings,
    numbers: a dataclass or model as a dict of its fields), each argument cut where its recorded text would be; it
    shares nothing with what the tool receives.
    """
    SETTINGS.current = make_settings(
        base=SETTINGS.current,
        capture_content=capture_content,
        capture_turn_messages=capture_turn_messages,
        max_length=max_content_length,
        redact_keys=redact_keys,
        redact_pattern=redact_pattern,
        redact_hook=redact_hook,
    )


def _env_choice(names: tuple[str, ...], allowed: tuple[str, ...], default: str) -> str:
    for name in names:
        raw = os.environ.get(name)
        if raw is None or not raw.strip():
            continue
        value, *rest = (part.strip() for part in raw.strip().lower().split(","))
        if value in allowed:
            if any(rest):
                logger.warning("toolwatch: %s=%r names several; only %s is used", name, raw, value)
            return value
        logger.warning("ignoring %s=%r: expected one of %s; using %s", name, raw, ", ".join(allowed), default)
        return default
    return default


def _http_endpoint(endpoint: str | None) -> str | None:
    if endpoint is None:
        return None
    if urlsplit(endpoint).path in ("", "/"):
        return endpoint.rstrip("/") + "/v1/traces"
    return endpoint


def _warn_traces_endpoint_without_path() -> None:
    """OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as given (the specification: `/v1/traces` is appended to
    OTEL_EXPORTER_OTLP_ENDPOINT only); without a path the exporter posts to `/`, which OTLP receivers (toolwatch
    serve, the Collector) answer 404, and the exporter logs only that status. Kept as given, and said."""
    raw = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    try:
        path = urlsplit(raw).path if raw else None
    except ValueError:  # the exporter's own construction reports it
        return
    if path in ("", "/"):
        logger.warning("toolwatch: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=%r has no path: the OTLP/HTTP exporter posts to "
                       "it as given, and receivers take traces at /v1/traces; write %r, or set "
                       "OTEL_EXPORTER_OTLP_ENDPOINT (the base URL, to which /v1/traces is added) instead",
                       raw, raw.rstrip("/") + "/v1/traces")


def _warn_grpc_endpoint_without_scheme(endpoint: str | None) -> None:
    """The OTLP/gRPC exporter connects with TLS unless its endpoint starts with http:// or an INSECURE variable says
    otherwise: `127.0.0.1:4317` (how gRPC addresses are usually written) then fails its handshake with a plaintext
    receiver (toolwatch serve's gRPC port, the Collector's default), and the exporter logs only UNAVAILABLE. Kept
    as given (TLS may be meant), and said."""
    raw = endpoint if endpoint is not None else next(
        (v for v in map(os.environ.get, ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")) if v),
        None,
    )
    if raw is None or any(os.environ.get(v) is not None for v in GRPC_INSECURE_VARIABLES):
        return
    try:
        scheme = urlsplit(raw.strip()).scheme.lower()
    except ValueError:  # the exporter's own construction reports it
        return
    if scheme not in ("http", "https"):
        logger.warning("toolwatch: the OTLP/gRPC endpoint %r has no http:// or https:// scheme, so the exporter "
                       "connects with TLS, which a plaintext receiver (toolwatch serve's --grpc-port) refuses; write "
                       "%r for plaintext, https://... for TLS, or set OTEL_EXPORTER_OTLP_INSECURE=true",
                       raw, "http://" + raw.strip())


def _make_exporter(name: str, endpoint: str | None, headers: Mapping[str, str] | None) -> SpanExporter | None:
    if name == "otlp":
        protocol = _env_choice(
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"),
            ("http/protobuf", "grpc", "http/json"), "http/protobuf",
        )
        if protocol == "http/json":
            logger.warning("toolwatch: OTLP http/json is not supported by the Python exporter; using http/protobuf")
        name = "otlp-grpc" if protocol == "grpc" else "otlp-http"
    if name in ("otlp-http", "otlp-grpc"):
        warn_timeout_in_millis()
    if name == "otlp-http":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        if endpoint is None:
            _warn_traces_endpoint_without_path()
        return HttpExporter(endpoint=_http_endpoint(endpoint), headers=dict(headers) if headers else None)
    if name == "otlp-grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        # gRPC metadata keys are lowercase (a capital letter failed every export); HTTP header names ignore case
        metadata = {key.lower(): value for key, value in headers.items()} if headers else None
        _warn_grpc_endpoint_without_scheme(endpoint)
        with without_malformed(GRPC_EXPORTER):  # it raises on a timeout or compression it cannot read
            return GrpcExporter(endpoint=endpoint, headers=metadata)
    if name == "console":
        return ConsoleSpanExporter(out=sys.stdout)
    if name == "memory":
        return InMemorySpanExporter()
    return None


def _built_exporter(name: str, endpoint: str | None, headers: Mapping[str, str] | None) -> SpanExporter | None:
    """`_make_exporter`, or, when the exporter cannot be built (an endpoint urllib cannot split, from the argument or
    the environment), an exporter whose every export fails: logged once here, the spans counted as failed exports."""
    try:
        return _make_exporter(name, endpoint, headers)
    except Exception as exc:  # noqa: BLE001 - the agent starts whatever the telemetry settings
        given = endpoint or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get(
            "OTEL_EXPORTER_OTLP_ENDPOINT")
        logger.error("toolwatch: cannot build the OTLP exporter (endpoint %r): %s: %s; spans are not exported and "
                     "count as failed exports", given, type(exc).__name__, exc)
        return UnusableExporter(f"{type(exc).__name__}: {exc}")


_SDK_EXPORT_BATCH = 512  # BatchSpanProcessor's defaults
_SDK_SCHEDULE_DELAY_MILLIS = 5000


def _processor(
    exporter: SpanExporter, simple: bool, max_queue_size: int | None, max_export_batch_size: int | None,
    schedule_delay_millis: float | None, shutdown_timeout_millis: int | None, max_queue_bytes: int | None = None,
) -> SpanProcessor:
    """The span processor; the `OTEL_BSP_*` sizes are read here, not by the SDK, which raises on a value it refuses
    (0 or less, a batch over the queue): a bad value warns and falls back, the agent starts."""
    guarded = CountingExporter(exporter)
    if simple:
        return SimpleSpanProcessor(guarded)
    queue = max_queue_size or env_int("OTEL_BSP_MAX_QUEUE_SIZE", DEFAULT_MAX_QUEUE_SIZE)
    batch = max_export_batch_size or env_int("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", _SDK_EXPORT_BATCH)
    if batch > queue:
        if max_export_batch_size is not None and max_queue_size is not None:  # both in code: the caller's mistake
            raise ValueError(f"max_export_batch_size ({batch}) must not exceed max_queue_size ({queue})")
        logger.warning("toolwatch: export batch size %d is larger than the export queue (%d spans); using %d",
                       batch, queue, queue)
        batch = queue
    delay = schedule_delay_millis or env_int("OTEL_BSP_SCHEDULE_DELAY", _SDK_SCHEDULE_DELAY_MILLIS)
    if shutdown_timeout_millis is None:
        shutdown_timeout_millis = env_int(ENV_SHUTDOWN_TIMEOUT, DEFAULT_SHUTDOWN_TIMEOUT_MILLIS, minimum=0)
    queue_bytes = max_queue_bytes or env_int(ENV_MAX_QUEUE_BYTES, DEFAULT_MAX_QUEUE_BYTES)
    return CountingBatchSpanProcessor(guarded, max_queue_size=queue, max_export_batch_size=batch,
                                      schedule_delay_millis=delay, shutdown_timeout_millis=shutdown_timeout_millis,
                                      max_queue_bytes=queue_bytes)


def _install_global(provider: TracerProvider, set_global: bool | None) -> None:
    current = trace.get_tracer_provider()
    unset = isinstance(current, trace.ProxyTracerProvider)
    if set_global is False or (set_global is None and not unset):
        return
    if not unset:
        logger.warning("toolwatch: OpenTelemetry does not allow replacing the global TracerProvider already set; "
                       "toolwatch's own spans go to the new provider, other instrumentation keeps the old one")
        return
    trace.set_tracer_provider(provider)


def configure(  # noqa: C901 - one flat pass over the options
    *,
    service_name: str | None = None,
    exporter: ExporterName | SpanExporter | None = None,
    endpoint: str | None = None,
    headers: Mapping[str, str] | None = None,
    sampler: Sampler | None = None,
    resource_attributes: Mapping[str, Any] | None = None,
    max_queue_size: int | None = None,
    max_queue_bytes: int | None = None,
    schedule_delay_millis: float | None = None,
    max_export_batch_size: int | None = None,
    shutdown_timeout_millis: int | None = None,
    simple: bool | None = None,
    set_global: bool | None = None,
    capture_content: bool | None = None,
    capture_turn_messages: bool | None = None,
    max_content_length: int | None = None,
    redact_keys: Iterable[str] | None = None,
    redact_pattern: str | re.Pattern[str] | None = None,
    redact_hook: RedactHook | None = None,
) -> ToolwatchTracerProvider:
    """Set up a TracerProvider for toolwatch's spans and return it.

    `exporter`: "otlp" (default; HTTP/protobuf unless `OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL=grpc`),
    "otlp-http", "otlp-grpc", "console", "memory" (an `InMemorySpanExporter`, at `provider.exporter`),
    "none", or any `SpanExporter`; default from `OTEL_TRACES_EXPORTER`. `endpoint` / `headers` default to
    the standard `OTEL_EXPORTER_OTLP_*` variables (an HTTP endpoint without a path gets `/v1/traces`; gRPC gets the
    header names lowercase; an endpoint that cannot be parsed is logged, and the spans count as failed exports);
    the service name to `OTEL_SERVICE_NAME`; the sampler to `OTEL_TRACES_SAMPLER[_ARG]`.
    Spans are batched (`simple=True`, the default for "memory", exports each span as it ends, on the thread that
    ends it: with a network exporter each tool call then waits for its export, which is warned of) in a queue
    of `max_queue_size` (default 16384 or `OTEL_BSP_MAX_QUEUE_SIZE`) spans holding at most `max_queue_bytes` (default
    64 MiB or `TOOLWATCH_MAX_QUEUE_BYTES`: each span's content, see `queued_size`, and 3 KiB) between them, past
    which the oldest are dropped; drops are counted (`dropped_spans()`). A shutdown, also the one at interpreter
    exit, exports for at most
    `shutdown_timeout_millis` (default 3000 or `TOOLWATCH_SHUTDOWN_TIMEOUT`, in ms; 0: not at all), then drops
    and counts what is left: with the monitor down an agent's process still exits within it.
    The global provider is set only if none is set yet (`set_global=False`: never);
    OpenTelemetry lets the global be set once, so with one already set even `set_global=True` only logs
    a warning, while toolwatch's own spans still go to the returned provider. The content options are
    those of `configure_content`. Bad environment values warn and fall back to the defaults. Call it once
    at start-up; a second call sends toolwatch's spans to a new provider and leaves the first running.
    """
    configure_content(
        capture_content=capture_content, capture_turn_messages=capture_turn_messages,
        max_content_length=max_content_length, redact_keys=redact_keys, redact_pattern=redact_pattern,
        redact_hook=redact_hook,
    )
    if max_queue_size is not None and max_queue_size < 1:
        raise ValueError(f"max_queue_size must be positive, got {max_queue_size}")
    if max_queue_bytes is not None and max_queue_bytes < 1:
        raise ValueError(f"max_queue_bytes must be positive, got {max_queue_bytes}")
    if shutdown_timeout_millis is not None and shutdown_timeout_millis < 0:
        raise ValueError(f"shutdown_timeout_millis must not be negative, got {shutdown_timeout_millis}")
    if exporter is None:
        exporter = _env_choice(("OTEL_TRACES_EXPORTER",), ("otlp", "console", "none"), "otlp")  # type: ignore[assignment]
    if isinstance(exporter, str) and exporter not in _EXPORTERS:
        raise ValueError(f"unknown exporter {exporter!r}: use one of {', '.join(_EXPORTERS)} or a SpanExporter")
    attributes: dict[str, Any] = dict(resource_attributes or {})
    if service_name is not None:
        attributes["service.name"] = service_name
    with without_malformed(SPAN_LIMITS):  # the SDK raises on a span limit it cannot read
        provider = ToolwatchTracerProvider(sampler=sampler, resource=Resource.create(attributes))
    chosen = _built_exporter(exporter, endpoint, headers) if isinstance(exporter, str) else exporter
    if chosen is not None:
        use_simple = simple if simple is not None else exporter == "memory"
        if use_simple and exporter in ("otlp", "otlp-http", "otlp-grpc"):
            logger.warning("toolwatch: simple=True exports each span on the thread that ends it: with the %s exporter "
                           "every tool call waits for its export (the exporter's whole timeout and retries when the "
                           "monitor is down); the batching default keeps exports off the agent's path", exporter)
        processor = _processor(
            chosen, use_simple, max_queue_size, max_export_batch_size, schedule_delay_millis, shutdown_timeout_millis,
            max_queue_bytes,
        )
        provider.add_span_processor(processor)
        provider.exporter = chosen
        provider.processor = processor
    set_tracer_provider(provider)
    _install_global(provider, set_global)
    return provider


def shutdown(provider: TracerProvider | None = None, timeout_millis: int | None = None) -> None:
    """Flush and shut down `provider` (default: the one toolwatch uses, if `configure()` made it), exporting for at
    most `timeout_millis` (default: the `shutdown_timeout_millis` of `configure()`)."""
    from instrumentation._context import TRACING

    # Only a provider configure() made: one the application handed to set_tracer_provider() is the application's
    target = provider if provider is not None else TRACING.provider
    if provider is None and not isinstance(target, ToolwatchTracerProvider):
        return
    if isinstance(target, TracerProvider):
        try:
            processor = getattr(target, "processor", None)
            if isinstance(processor, CountingBatchSpanProcessor):
                processor.shutdown(timeout_millis)  # exports what it can within the timeout (the SDK's flush cannot)
            else:
                target.force_flush(DEFAULT_SHUTDOWN_TIMEOUT_MILLIS if timeout_millis is None else timeout_millis)
            target.shutdown()
        except Exception:  # noqa: BLE001
            logger.exception("toolwatch: shutting down the tracer provider failed")
