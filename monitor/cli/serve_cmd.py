"""`toolwatch serve`: receive OTLP spans, judge turns, publish Prometheus metrics."""

from __future__ import annotations

import asyncio
import ctypes
import gc
import os

import click

from monitor.serve import _settings as env


def _pin_malloc_thresholds() -> None:
    """Pin glibc's mmap and trim thresholds high and fixed.

    Left alone, glibc raises its mmap threshold after large frees and request-sized buffers (hundreds of KiB)
    fragment the heap; pinned low (128 KiB), every body and socket read is mapped and unmapped again, which
    measured ~3 µs of system time per tool span. Pinned at 16 MiB / 64 MiB, buffers are reused from the heap:
    system time ~0.3 µs per tool span, and resident memory held flat (+3.4% from minute one to minute five at
    10,000 spans/s in bench_serve)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3
        libc.mallopt(m_mmap_threshold, 16 << 20)
        libc.mallopt(m_trim_threshold, 64 << 20)
    except (OSError, AttributeError):  # not glibc: nothing to tune
        pass


@click.command()
@click.option(
    "--rules",
    "rules",
    multiple=True,
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    envvar=env.ENV_RULES,
    help="Oracle rule file (YAML); repeat for several.",
)
@click.option("--host", default="127.0.0.1", show_default=True, envvar=env.ENV_HOST, help="OTLP/HTTP listen address.")
@click.option("--port", default=4318, show_default=True, type=int, envvar=env.ENV_PORT, help="OTLP/HTTP port.")
@click.option(
    "--grpc-port", type=int, envvar=env.ENV_GRPC_PORT, help="Also receive OTLP/gRPC on this port (usually 4317)."
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    envvar=env.ENV_METRICS_HOST,
    help="Listen address of /metrics, /healthz and /readyz.",
)
@click.option(
    "--metrics-port",
    default=9464,
    show_default=True,
    type=int,
    envvar=env.ENV_METRICS_PORT,
    help="Port of /metrics, /healthz and /readyz.",
)
@click.option(
    "--grace",
    default="2s",
    show_default=True,
    envvar=env.ENV_GRACE,
    help="Wait this long after a turn span arrives for late tool spans before judging it.",
)
@click.option(
    "--turnless-timeout",
    default="30s",
    show_default=True,
    envvar=env.ENV_TURNLESS_TIMEOUT,
    help="Judge tool calls whose turn never arrives alone after this long.",
)
@click.option(
    "--max-pending",
    default=100_000,
    show_default=True,
    type=int,
    envvar=env.ENV_MAX_PENDING,
    help="Pending traces held by turn assembly; beyond it the oldest is judged early and counted.",
)
@click.option(
    "--queue-spans",
    default=262_144,
    show_default=True,
    type=int,
    envvar=env.ENV_QUEUE_SPANS,
    help="Spans queued before requests get 503 + Retry-After.",
)
@click.option(
    "--max-body-bytes",
    default=16 << 20,
    show_default=True,
    type=int,
    envvar=env.ENV_MAX_BODY,
    help="Largest request body as sent (413 beyond; checked before reading).",
)
@click.option(
    "--max-decompressed-bytes",
    default=64 << 20,
    show_default=True,
    type=int,
    envvar=env.ENV_MAX_DECOMPRESSED,
    help="Largest body after gzip decompression (413 beyond; decompression stops there).",
)
@click.option(
    "--windows",
    default="5m,1h",
    show_default=True,
    envvar=env.ENV_WINDOWS,
    help="Rolling windows of the ratio gauges, comma-separated.",
)
@click.option(
    "--agent",
    "agents",
    multiple=True,
    envvar=env.ENV_AGENTS,
    help="Agent name allowed as a label value besides those the rules name; repeat for several.",
)
@click.option("--token", envvar=env.ENV_TOKEN, help="Require 'Authorization: Bearer TOKEN' on /v1/traces.")
@click.option(
    "--verdict-log", type=click.Path(dir_okay=False), envvar=env.ENV_VERDICT_LOG, help="JSONL verdict log file."
)
@click.option(
    "--verdict-log-all", is_flag=True, envvar=env.ENV_VERDICT_LOG_ALL, help="Log every turn, not only failing ones."
)
@click.option(
    "--verdict-log-max-bytes",
    default=64 << 20,
    show_default=True,
    type=int,
    envvar=env.ENV_VERDICT_LOG_MAX_BYTES,
    help="Rotate the verdict log at this size (3 backups kept).",
)
@click.option(
    "--watch/--no-watch",
    "watch_rules",
    default=True,
    show_default=True,
    envvar=env.ENV_WATCH_RULES,
    help="Reload the rules when a rule file changes (SIGHUP always reloads).",
)
@click.option(
    "--alerts/--no-alerts",
    "alerts",
    default=True,
    show_default=True,
    envvar=env.ENV_ALERTS,
    help="Evaluate the rule file's alerts in process (toolwatch_alert_active).",
)
@click.option(
    "--alert-webhook",
    envvar=env.ENV_ALERT_WEBHOOK,
    metavar="URL",
    help="Send firing alerts to this Alertmanager (/api/v2/alerts) or webhook URL.",
)
def serve(**opts: object) -> None:
    """Receive OTLP spans of agents, judge each turn, and publish the figures on /metrics.

    Agents export with any OTLP/HTTP exporter (protobuf or JSON, gzip optional), e.g.
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:4318/v1/traces.
    """
    from monitor.metrics import parse_duration
    from monitor.rules import RuleFileError
    from monitor.serve import Server, Settings

    try:
        settings = Settings(
            rules=tuple(str(p) for p in opts["rules"]),  # type: ignore[attr-defined]
            host=str(opts["host"]),
            port=int(str(opts["port"])),
            grpc_port=int(str(opts["grpc_port"])) if opts["grpc_port"] is not None else None,
            metrics_host=str(opts["metrics_host"]),
            metrics_port=int(str(opts["metrics_port"])),
            grace_s=parse_duration(str(opts["grace"])),
            turnless_timeout_s=parse_duration(str(opts["turnless_timeout"])),
            max_pending=int(str(opts["max_pending"])),
            queue_spans=int(str(opts["queue_spans"])),
            max_body_bytes=int(str(opts["max_body_bytes"])),
            max_decompressed_bytes=int(str(opts["max_decompressed_bytes"])),
            windows=env.parse_windows(str(opts["windows"])),
            agents=tuple(str(a) for a in opts["agents"]),  # type: ignore[attr-defined]
            token=str(opts["token"]) if opts["token"] else None,
            verdict_log=str(opts["verdict_log"]) if opts["verdict_log"] else None,
            verdict_log_all=bool(opts["verdict_log_all"]),
            verdict_log_max_bytes=int(str(opts["verdict_log_max_bytes"])),
            watch_rules=bool(opts["watch_rules"]),
            alerts=bool(opts["alerts"]),
            alert_webhook=str(opts["alert_webhook"]) if opts["alert_webhook"] else None,
        )
        settings.validate()
        server = Server(settings)
    except RuleFileError as exc:
        raise click.ClickException(f"invalid rules: {exc}") from None
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None

    def started(server: Server) -> None:
        # A long-running server: keep the start-up objects out of every collection, and collect less often.
        # Records live for the grace period (2 s by default): with the middle generation collected only every
        # 100 young collections (~5 s at 50,000 spans/s) most of them die there instead of reaching the old
        # generation, whose full collections scan every pending record. The hot path's objects are acyclic and
        # freed by reference counting; the young generation only holds cyclic garbage longer. (Records built by the
        # C extensions are not tracked at all: see monitor/_cext/records.h.)
        if os.environ.get("TOOLWATCH_GC_TUNING", "1") != "0":
            gc.freeze()
            gc.set_threshold(200_000, 100, 100)
            _pin_malloc_thresholds()
        click.echo(
            f"toolwatch serve: OTLP/HTTP on {server.endpoint}, metrics on {server.metrics_url}"
            + (f", OTLP/gRPC on {server.settings.host}:{server.grpc_port}" if server.grpc_port else "")
            + f" (pid {os.getpid()})",
            err=True,
        )

    async def run() -> None:
        try:
            await server.serve_forever(started)
        except OSError as exc:
            raise click.ClickException(str(exc)) from None

    asyncio.run(run())
