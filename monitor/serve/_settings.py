"""Settings of `toolwatch serve`: a dataclass with defaults, filled from the environment by `from_env()`."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from monitor.assembly import DEFAULT_MAX_PENDING_BYTES
from monitor.metrics import DEFAULT_WINDOWS, DurationTooLong, parse_duration
from monitor.metrics.names import OTHER
from monitor.sizes import parse_size

logger = logging.getLogger(__name__)

# Environment variables (each documented here; the CLI options take the same names via envvar=).
ENV_RULES = "TOOLWATCH_RULES"  # rule files, separated by the OS path separator (':' on POSIX)
ENV_HOST = "TOOLWATCH_HOST"
ENV_PORT = "TOOLWATCH_PORT"
ENV_GRPC_PORT = "TOOLWATCH_GRPC_PORT"  # OTLP/gRPC port (off unless set; 4317 is the usual one)
ENV_METRICS_HOST = "TOOLWATCH_METRICS_HOST"
ENV_METRICS_PORT = "TOOLWATCH_METRICS_PORT"
ENV_GRACE = "TOOLWATCH_GRACE"  # seconds, or a duration like 2s
ENV_TURNLESS_TIMEOUT = "TOOLWATCH_TURNLESS_TIMEOUT"
ENV_MAX_PENDING = "TOOLWATCH_MAX_PENDING"
ENV_MAX_PENDING_BYTES = "TOOLWATCH_MAX_PENDING_BYTES"
ENV_QUEUE_SPANS = "TOOLWATCH_QUEUE_SPANS"
ENV_QUEUE_BYTES = "TOOLWATCH_QUEUE_BYTES"
ENV_MAX_BODY = "TOOLWATCH_MAX_BODY_BYTES"
ENV_MAX_DECOMPRESSED = "TOOLWATCH_MAX_DECOMPRESSED_BYTES"
ENV_WINDOWS = "TOOLWATCH_WINDOWS"  # comma-separated durations, e.g. 5m,1h
ENV_AGENTS = "TOOLWATCH_AGENTS"  # comma-separated agent names allowed as label values (besides the rules')
ENV_TOKEN = "TOOLWATCH_TOKEN"  # bearer token required on /v1/traces when set
ENV_VERDICT_LOG = "TOOLWATCH_VERDICT_LOG"
ENV_VERDICT_LOG_ALL = "TOOLWATCH_VERDICT_LOG_ALL"
ENV_VERDICT_LOG_MAX_BYTES = "TOOLWATCH_VERDICT_LOG_MAX_BYTES"
ENV_READ_TIMEOUT = "TOOLWATCH_READ_TIMEOUT"  # a duration: request head (and idle keep-alive) and body, each
ENV_MAX_CONNECTIONS = "TOOLWATCH_MAX_CONNECTIONS"
ENV_RETRY_AFTER = "TOOLWATCH_RETRY_AFTER"  # a whole number of seconds, or a duration like 5s or 1m
ENV_WATCH_RULES = "TOOLWATCH_WATCH_RULES"
ENV_ALERTS = "TOOLWATCH_ALERTS"  # evaluate the rule file's alerts in process (toolwatch_alert_active)
ENV_ALERT_WEBHOOK = "TOOLWATCH_ALERT_WEBHOOK"  # Alertmanager (/api/v2/alerts) or webhook URL for firing alerts

MiB = 1024 * 1024
VERDICT_LOG_MIN_BYTES = 1024  # the verdict log rotates at a size of at least this

# The delay a 503 (Retry-After) and a gRPC UNAVAILABLE (RetryInfo) ask for, in whole seconds (Retry-After has no
# fractions). At most 5 minutes, the default retry budget of the Collector's exporters (max_elapsed_time): past it
# they stop retrying a batch, so a longer delay would lose spans rather than spread the load.
RETRY_AFTER_MAX_S = 300

# What listens where, and the options that set its address: a bind error names them.
RECEIVER = ("OTLP/HTTP", "--host", "--port")
METRICS = ("/metrics", "--metrics-host", "--metrics-port")
GRPC = ("OTLP/gRPC", "--host", "--grpc-port")


_ANY_ADDRESS = frozenset({"", "0.0.0.0", "::"})


def port_clash(s: Settings) -> str | None:
    """Two listeners of `s` given one port (not 0) on addresses that overlap: the clash, naming both options. The
    second bind would fail as if another process held the port."""
    listeners = [(s.host, s.port, RECEIVER)]
    if s.grpc_port is not None:
        listeners.append((s.host, s.grpc_port, GRPC))
    listeners.append((s.metrics_host, s.metrics_port, METRICS))
    for i, (host, port, (what, _, option)) in enumerate(listeners):
        for other_host, other_port, (other_what, _, other_option) in listeners[i + 1 :]:
            overlap = host == other_host or host in _ANY_ADDRESS or other_host in _ANY_ADDRESS
            if port and port == other_port and overlap:
                return (
                    f"{option} and {other_option} are both {port}: {what} and {other_what} need a port each "
                    f"(choose another {other_option})"
                )
    return None


MIN_WINDOW_S = 1.0  # the worker ticks once a second: a shorter window would hold no snapshot to subtract


def parse_windows(text: str) -> tuple[float, ...]:
    """Comma-separated durations (TOOLWATCH_WINDOWS, --windows): '5m,1h' -> (300.0, 3600.0); each at least
    MIN_WINDOW_S, a window given twice (5m,300s) once."""
    out: list[float] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        seconds = parse_duration(part)
        if seconds < MIN_WINDOW_S:
            raise ValueError(f"window {part!r} is shorter than 1s: the gauges are updated once a second")
        if seconds not in out:
            out.append(seconds)
    return tuple(out)


def check_agents(agents: tuple[str, ...]) -> None:
    """ValueError when an agent name given besides the rules' is the reserved label value OTHER."""
    if OTHER in agents:
        raise ValueError(f"agent name {OTHER!r} is reserved: it is the label of every agent outside the configuration")


def names(text: str) -> tuple[str, ...]:
    """Comma-separated names (TOOLWATCH_AGENTS, --agent): 'a, b' -> ('a', 'b')."""
    return tuple(p.strip() for p in text.split(",") if p.strip())


def _duration_or_zero(text: str) -> float:
    """A duration, 0 allowed (TOOLWATCH_GRACE, TOOLWATCH_TURNLESS_TIMEOUT: 0 judges at once)."""
    return parse_duration(text, allow_zero=True)


def retry_after(text: str) -> int:
    """A duration of whole seconds from 1 s to RETRY_AFTER_MAX_S (TOOLWATCH_RETRY_AFTER, --retry-after): '2m' -> 120."""
    too_long = f"retry delay {text!r} is too long: at most 5m (exporters stop retrying a batch after that)"
    try:
        seconds = parse_duration(text)
    except DurationTooLong:
        raise ValueError(too_long) from None
    if seconds > RETRY_AFTER_MAX_S:
        raise ValueError(too_long)
    if seconds != int(seconds):
        raise ValueError(f"retry delay {text!r} is not a whole number of seconds (Retry-After has no fractions)")
    return int(seconds)


def _paths(text: str) -> tuple[str, ...]:
    return tuple(p for p in text.split(os.pathsep) if p)


def _port(text: str) -> int:
    port = int(text)
    if not 0 <= port <= 65535:
        raise ValueError(f"port {port} is not in 0-65535")
    return port


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"not a boolean: {text!r}")


def token_problem(token: str | None) -> str | None:
    """What makes `--token` one no client can send (surrounding whitespace aside, which is not compared), or None."""
    if not token:
        return None
    token = token.strip()
    if not token:
        return "the token is only whitespace: give one that clients can send, or none"
    if any("\ud800" <= ch <= "\udfff" for ch in token):  # undecodable bytes of the environment, kept so
        return "the token is not UTF-8: give it as text"
    if any(ch < " " or "\x7f" <= ch <= "\x9f" for ch in token):
        return ("the token holds a control character, which no header value (nor gRPC metadata) can carry: give one "
                "that clients can send")
    return None


@dataclass(slots=True)
class Settings:
    rules: tuple[str, ...] = ()
    host: str = "127.0.0.1"
    port: int = 4318  # OTLP/HTTP
    grpc_port: int | None = None  # OTLP/gRPC, off by default
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 9464
    grace_s: float = 2.0
    turnless_timeout_s: float = 30.0
    max_pending: int = 100_000  # pending traces held by turn assembly
    max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES  # estimated weight of the records they hold (assembly._budget)
    max_calls_per_trace: int = 1_000
    queue_spans: int = 262_144  # spans accepted but not yet assembled; beyond: 503 + Retry-After
    queue_bytes: int = 256 * MiB  # what they weigh, estimated as turn assembly weighs records; beyond: the same
    max_body_bytes: int = 16 * MiB  # request body as sent (compressed or not)
    max_decompressed_bytes: int = 64 * MiB
    windows: tuple[float, ...] = DEFAULT_WINDOWS
    agents: tuple[str, ...] = ()
    token: str | None = None
    verdict_log: str | None = None
    verdict_log_all: bool = False
    verdict_log_max_bytes: int = 64 * MiB
    verdict_log_backups: int = 3
    watch_rules: bool = True
    alerts: bool = True
    alert_webhook: str | None = None
    alert_interval_s: float = 5.0
    watch_interval_s: float = 1.0
    retry_after_s: int = 1  # whole seconds, 1 to RETRY_AFTER_MAX_S: Retry-After of a 503, RetryInfo of UNAVAILABLE
    read_timeout_s: float = 30.0  # a request's head (also of an idle connection) and body must arrive within it
    max_connections: int = 1024  # open OTLP/HTTP connections; beyond: 503 + Retry-After, and closed
    poll_interval_s: float = 0.1
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Settings from TOOLWATCH_* variables; a bad value logs a warning and keeps the default."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        table: list[tuple[str, str, Callable[[str], Any]]] = [
            (ENV_RULES, "rules", _paths),
            (ENV_HOST, "host", str),
            (ENV_PORT, "port", _port),
            (ENV_GRPC_PORT, "grpc_port", _port),
            (ENV_METRICS_HOST, "metrics_host", str),
            (ENV_METRICS_PORT, "metrics_port", _port),
            (ENV_GRACE, "grace_s", _duration_or_zero),
            (ENV_TURNLESS_TIMEOUT, "turnless_timeout_s", _duration_or_zero),
            (ENV_MAX_PENDING, "max_pending", int),
            (ENV_MAX_PENDING_BYTES, "max_pending_bytes", parse_size),
            (ENV_QUEUE_SPANS, "queue_spans", int),
            (ENV_QUEUE_BYTES, "queue_bytes", parse_size),
            (ENV_MAX_BODY, "max_body_bytes", parse_size),
            (ENV_MAX_DECOMPRESSED, "max_decompressed_bytes", parse_size),
            (ENV_READ_TIMEOUT, "read_timeout_s", parse_duration),
            (ENV_MAX_CONNECTIONS, "max_connections", int),
            (ENV_RETRY_AFTER, "retry_after_s", retry_after),
            (ENV_WINDOWS, "windows", parse_windows),
            (ENV_AGENTS, "agents", names),
            (ENV_TOKEN, "token", str),
            (ENV_VERDICT_LOG, "verdict_log", str),
            (ENV_VERDICT_LOG_ALL, "verdict_log_all", _bool),
            (ENV_VERDICT_LOG_MAX_BYTES, "verdict_log_max_bytes", lambda raw: parse_size(raw, VERDICT_LOG_MIN_BYTES)),
            (ENV_WATCH_RULES, "watch_rules", _bool),
            (ENV_ALERTS, "alerts", _bool),
            (ENV_ALERT_WEBHOOK, "alert_webhook", str),
        ]
        for var, name, conv in table:
            raw = env.get(var)
            if raw is None or raw == "":
                continue
            try:
                values[name] = conv(raw)
            except ValueError as exc:
                logger.warning("ignoring %s=%r (%s); using the default", var, raw, exc)
        values.update({k: v for k, v in overrides.items() if v is not None})
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise TypeError(f"unknown settings: {sorted(unknown)}")
        s = cls(**values)
        s.validate()
        return s

    def validate(self) -> None:
        """ValueError when a value is out of range or, last, two listeners are given one port (port_clash)."""
        for name in (
            "max_pending",
            "max_pending_bytes",
            "max_calls_per_trace",
            "queue_spans",
            "queue_bytes",
            "max_body_bytes",
            "max_decompressed_bytes",
            "max_connections",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        for name in ("port", "grpc_port", "metrics_port"):
            port = getattr(self, name)
            if port is not None and not 0 <= port <= 65535:
                raise ValueError(f"{name} must be 0-65535, not {port}")
        if self.verdict_log_max_bytes < VERDICT_LOG_MIN_BYTES:
            raise ValueError(f"verdict_log_max_bytes must be >= {VERDICT_LOG_MIN_BYTES}")
        if self.grace_s < 0 or self.turnless_timeout_s < 0:
            raise ValueError("grace and turnless timeout must be >= 0")
        if not self.read_timeout_s > 0:
            raise ValueError("read timeout must be > 0")
        if not 1 <= self.retry_after_s <= RETRY_AFTER_MAX_S or self.retry_after_s != int(self.retry_after_s):
            raise ValueError(f"retry_after_s must be a whole number of seconds from 1 to {RETRY_AFTER_MAX_S}")
        if not self.windows:
            raise ValueError("at least one rolling window is needed")
        problem = token_problem(self.token)
        if problem is not None:
            raise ValueError(problem)
        check_agents(self.agents)
        clash = port_clash(self)
        if clash is not None:
            raise ValueError(clash)
