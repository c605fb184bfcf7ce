"""`toolwatch serve`: receive OTLP spans, judge turns, publish Prometheus metrics."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

import click

from monitor.assembly import DEFAULT_MAX_PENDING_BYTES
from monitor.cli._params import (
    PORT,
    RULES_HELP,
    SIZE_UNITS,
    ByteSize,
    Duration,
    InputError,
    RetryAfter,
    RulesCommand,
)
from monitor.serve import _settings as env
from monitor.sizes import format_size

if TYPE_CHECKING:
    from monitor.serve import Settings


class Windows(click.ParamType[tuple[float, ...]]):
    """Comma-separated durations, at least one."""

    name = "durations"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> tuple[float, ...]:
        if isinstance(value, tuple):
            return value
        try:
            windows = env.parse_windows(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        if not windows:
            self.fail("at least one rolling window is needed", param, ctx)
        return windows


def _agents(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    """--agent (TOOLWATCH_AGENTS): refused here, so that the error names the option, when it names OTHER."""
    try:
        env.check_agents(tuple(n for a in value for n in env.names(str(a))))
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return value


def _receiver_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--alert-webhook (TOOLWATCH_ALERT_WEBHOOK): an http(s) URL, refused here so that the error names the option."""
    from monitor.alerts.notify import check_receiver_url

    if value:
        try:
            check_receiver_url(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
    return value


# Every option can be set by its TOOLWATCH_* variable, and --help says which.
option = functools.partial(click.option, show_envvar=True)


def settings_from_options(opts: Mapping[str, object]) -> Settings:
    """The serve command's parsed options as Settings."""
    from monitor.serve import Settings

    return Settings(
        rules=tuple(str(p) for p in opts["rules"]),  # type: ignore[attr-defined]
        host=str(opts["host"]),
        port=int(str(opts["port"])),
        grpc_port=int(str(opts["grpc_port"])) if opts["grpc_port"] is not None else None,
        metrics_host=str(opts["metrics_host"]),
        metrics_port=int(str(opts["metrics_port"])),
        grace_s=float(str(opts["grace"])),
        turnless_timeout_s=float(str(opts["turnless_timeout"])),
        max_pending=int(str(opts["max_pending"])),
        max_pending_bytes=int(str(opts["max_pending_bytes"])),
        queue_spans=int(str(opts["queue_spans"])),
        queue_bytes=int(str(opts["queue_bytes"])),
        max_body_bytes=int(str(opts["max_body_bytes"])),
        max_decompressed_bytes=int(str(opts["max_decompressed_bytes"])),
        read_timeout_s=float(str(opts["read_timeout"])),
        max_connections=int(str(opts["max_connections"])),
        retry_after_s=int(str(opts["retry_after"])),
        windows=tuple(float(w) for w in opts["windows"]),  # type: ignore[attr-defined]
        agents=tuple(n for a in opts["agents"] for n in env.names(str(a))),  # type: ignore[attr-defined]
        token=str(opts["token"]) if opts["token"] else None,
        verdict_log=str(opts["verdict_log"]) if opts["verdict_log"] else None,
        verdict_log_all=bool(opts["verdict_log_all"]),
        verdict_log_max_bytes=int(str(opts["verdict_log_max_bytes"])),
        watch_rules=bool(opts["watch_rules"]),
        alerts=bool(opts["alerts"]),
        alert_webhook=str(opts["alert_webhook"]) if opts["alert_webhook"] else None,
    )


@click.command(cls=RulesCommand)
@option(
    "--rules",
    "rules",
    multiple=True,
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    envvar=env.ENV_RULES,
    help=f"Oracle rule file (YAML); repeat for several (in TOOLWATCH_RULES, separated by ':'). {RULES_HELP}",
)
@option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    envvar=env.ENV_HOST,
    help="Listen address of OTLP/HTTP and OTLP/gRPC.",
)
@option("--port", default=4318, show_default=True, type=PORT, envvar=env.ENV_PORT, help="OTLP/HTTP port.")
@option("--grpc-port", type=PORT, envvar=env.ENV_GRPC_PORT, help="Also receive OTLP/gRPC on this port (usually 4317).")
@option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    envvar=env.ENV_METRICS_HOST,
    help="Listen address of /metrics, /healthz and /readyz.",
)
@option(
    "--metrics-port",
    default=9464,
    show_default=True,
    type=PORT,
    envvar=env.ENV_METRICS_PORT,
    help="Port of /metrics, /healthz and /readyz.",
)
@option(
    "--grace",
    default="2s",
    show_default=True,
    type=Duration(allow_zero=True),
    envvar=env.ENV_GRACE,
    help="Wait this long after a turn span arrives for late tool spans before judging it (0: judge at once).",
)
@option(
    "--turnless-timeout",
    default="30s",
    show_default=True,
    type=Duration(allow_zero=True),
    envvar=env.ENV_TURNLESS_TIMEOUT,
    help="Judge tool calls whose turn never arrives alone after this long (0: at once).",
)
@option(
    "--max-pending",
    default=100_000,
    show_default=True,
    type=click.IntRange(min=1),
    envvar=env.ENV_MAX_PENDING,
    help="Pending traces held by turn assembly; beyond it a trace of other spans only is dropped, else the oldest is "
    "judged early and counted.",
)
@option(
    "--max-pending-bytes",
    default=format_size(DEFAULT_MAX_PENDING_BYTES),
    show_default=True,
    type=ByteSize(),
    envvar=env.ENV_MAX_PENDING_BYTES,
    help="Estimated bytes the pending traces' records may hold (each record about 1.3 KB plus its text and its "
    f"attributes' text; {SIZE_UNITS}); beyond it the oldest traces are judged early and counted, until they hold "
    "90% of it.",
)
@option(
    "--queue-spans",
    default=262_144,
    show_default=True,
    type=click.IntRange(min=1),
    envvar=env.ENV_QUEUE_SPANS,
    help="Tool-call and turn spans queued before requests get 503 + Retry-After (an empty queue takes any request).",
)
@option(
    "--queue-bytes",
    default="256MiB",
    show_default=True,
    type=ByteSize(),
    envvar=env.ENV_QUEUE_BYTES,
    help=f"What the queued spans may weigh, estimated as --max-pending-bytes weighs records ({SIZE_UNITS}); beyond "
    "it requests get 503 + Retry-After too.",
)
@option(
    "--max-body-bytes",
    default="16MiB",
    show_default=True,
    type=ByteSize(),
    envvar=env.ENV_MAX_BODY,
    help=f"Largest request body as sent (413 beyond; checked before reading; {SIZE_UNITS}).",
)
@option(
    "--max-decompressed-bytes",
    default="64MiB",
    show_default=True,
    type=ByteSize(),
    envvar=env.ENV_MAX_DECOMPRESSED,
    help="Largest body after gzip, deflate or zstd decompression (413 beyond; decompression stops there; "
    f"over gRPC at most 2GiB less a byte, gRPC's own limit; {SIZE_UNITS}).",
)
@option(
    "--read-timeout",
    default="30s",
    show_default=True,
    type=Duration(),
    envvar=env.ENV_READ_TIMEOUT,
    help="A request's head must arrive within this long of the connection opening or the last answer (idle "
    "connections are closed then), and its body within this long after its head (504 beyond, which exporters "
    "retry); OTLP/gRPC alike.",
)
@option(
    "--max-connections",
    default=1024,
    show_default=True,
    type=click.IntRange(min=1),
    envvar=env.ENV_MAX_CONNECTIONS,
    help="Open OTLP/HTTP connections at once; one more is answered 503 + Retry-After and closed (OTLP/gRPC: "
    "as many more).",
)
@option(
    "--retry-after",
    default="1s",
    show_default=True,
    type=RetryAfter(),
    envvar=env.ENV_RETRY_AFTER,
    help="Delay exporters are asked to wait before a retry (503 Retry-After, gRPC RetryInfo); whole seconds, 1s-5m.",
)
@option(
    "--windows",
    default="5m,1h",
    show_default=True,
    type=Windows(),
    envvar=env.ENV_WINDOWS,
    help="Rolling windows of the ratio gauges, comma-separated durations (units ms, s, m, h, d), each at "
    "least 1s.",
)
@option(
    "--agent",
    "agents",
    multiple=True,
    envvar=env.ENV_AGENTS,
    callback=_agents,
    help="Agent name allowed as a label value besides those the rules name; repeat or separate by commas.",
)
@option("--token", envvar=env.ENV_TOKEN, help="Require 'Authorization: Bearer TOKEN' on /v1/traces.")
@option("--verdict-log", type=click.Path(dir_okay=False), envvar=env.ENV_VERDICT_LOG, help="JSONL verdict log file.")
@option(
    "--verdict-log-all", is_flag=True, envvar=env.ENV_VERDICT_LOG_ALL, help="Log every turn, not only failing ones."
)
@option(
    "--verdict-log-max-bytes",
    default="64MiB",
    show_default=True,
    type=ByteSize(minimum=env.VERDICT_LOG_MIN_BYTES),
    envvar=env.ENV_VERDICT_LOG_MAX_BYTES,
    help=f"Rotate the verdict log at this size (3 backups kept; {SIZE_UNITS}).",
)
@option(
    "--watch/--no-watch",
    "watch_rules",
    default=True,
    show_default=True,
    envvar=env.ENV_WATCH_RULES,
    help="Reload the rules when a rule file changes and stays unchanged for a second (SIGHUP always reloads).",
)
@option(
    "--alerts/--no-alerts",
    "alerts",
    default=True,
    show_default=True,
    envvar=env.ENV_ALERTS,
    help="Evaluate the rule file's alerts in process (toolwatch_alert_active).",
)
@option(
    "--alert-webhook",
    envvar=env.ENV_ALERT_WEBHOOK,
    metavar="URL",
    callback=_receiver_url,
    help="Send firing alerts to this Alertmanager (/api/v2/alerts) or webhook URL.",
)
def serve(**opts: object) -> None:
    """Receive OTLP spans of agents, judge each turn, and publish the figures on /metrics.

    Agents export with any OTLP/HTTP exporter (protobuf or JSON; gzip, deflate or zstd optional), e.g.
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:4318/v1/traces.
    """
    from monitor.cli._startup import take_sighup
    from monitor.rules import RuleFileError
    from monitor.serve import Server
    from monitor.serve._memory import tune_process

    # A reload is news to the operator who sent the SIGHUP or saved the file, as the start and stop lines are: its
    # line is shown without -v (a failed reload is an error, shown anyway).
    reloads = logging.getLogger("monitor.serve._rules")
    if reloads.getEffectiveLevel() > logging.INFO:
        reloads.setLevel(logging.INFO)
    try:
        settings = settings_from_options(opts)
        settings.validate()  # two listeners on one port too
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    try:
        server = Server(settings)
    except RuleFileError as exc:
        raise InputError(f"invalid rules: {exc}") from None
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None

    def started(server: Server) -> None:
        if take_sighup():  # sent while starting (held since the command line was imported): its reload now
            server.request_reload()
        tune_process()  # garbage collection and memory, for a long-running process (TOOLWATCH_GC_TUNING=0: none)
        click.echo(
            f"toolwatch serve: OTLP/HTTP on {server.endpoint}, metrics on {server.metrics_url}"
            + (f", OTLP/gRPC on {server.grpc_endpoint}" if server.grpc_port else "")
            + f" (pid {os.getpid()})",
            err=True,
        )

    async def run() -> int:
        try:
            return await server.serve_forever(started)
        except OSError as exc:
            raise click.ClickException(str(exc)) from None

    judged = asyncio.run(run())
    click.echo(f"toolwatch serve: stopped; {judged} pending turns judged at shutdown", err=True)
