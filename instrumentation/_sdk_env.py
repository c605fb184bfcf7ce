"""`OTEL_*` values the OpenTelemetry SDK raises on, hidden while `configure()` builds with them.

The SDK's span limits (`OTEL_*_LIMIT`: a non-negative integer, or empty for no limit) and the gRPC exporter's
timeout (a number of seconds) and compression (`gzip`) raise at construction on any other value, which would stop
the agent at start-up; `configure()` promises that bad values warn and fall back. Each malformed variable is warned
of and left out of `os.environ` while the provider or exporter is built, so the SDK takes its own default for it (no
default is copied here); the environment is restored afterwards. `configure()` runs once at start-up, before other
threads read these variables.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

logger = logging.getLogger(__name__)

Check = Callable[[str], bool | None]  # True: kept; False: hidden, with a warning; None: hidden quietly


def _limit(raw: str) -> bool:
    value = raw.strip()
    if not value:  # the SDK's "no limit"
        return True
    try:
        return int(value) >= 0
    except ValueError:
        return False


def _seconds(raw: str) -> bool:
    try:
        float(raw)
    except ValueError:
        return False
    return True


def _grpc_compression(raw: str) -> bool | None:
    value = raw.strip().lower()
    if value == "none":  # the specification's value for no compression, which the gRPC exporter raises on
        return None
    return value == "gzip"


SPAN_LIMITS: Mapping[str, tuple[Check, str]] = {
    name: (_limit, "a non-negative integer, or empty for no limit")
    for name in (
        "OTEL_ATTRIBUTE_COUNT_LIMIT",
        "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT",
        "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT",
        "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT",
        "OTEL_SPAN_EVENT_COUNT_LIMIT",
        "OTEL_SPAN_LINK_COUNT_LIMIT",
        "OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT",
        "OTEL_LINK_ATTRIBUTE_COUNT_LIMIT",
    )
}
# What makes the OTLP/gRPC exporter connect without TLS, besides an http:// endpoint (its traces variable first).
GRPC_INSECURE_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_INSECURE", "OTEL_EXPORTER_OTLP_INSECURE")
GRPC_EXPORTER: Mapping[str, tuple[Check, str]] = {
    "OTEL_EXPORTER_OTLP_TIMEOUT": (_seconds, "a number of seconds"),
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": (_seconds, "a number of seconds"),
    "OTEL_EXPORTER_OTLP_COMPRESSION": (_grpc_compression, "gzip (the gRPC exporter's only compression)"),
    "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": (_grpc_compression, "gzip (the gRPC exporter's only compression)"),
}


@contextmanager
def without_malformed(checks: Mapping[str, tuple[Check, str]]) -> Iterator[None]:
    """os.environ without the variables of `checks` whose values fail their check (each warned of, unless the check
    hides it quietly); the environment is as it was afterwards."""
    hidden: dict[str, str] = {}
    for name, (check, expected) in checks.items():
        raw = os.environ.get(name)
        if raw is None:
            continue
        verdict = check(raw)
        if verdict is True:
            continue
        if verdict is False:
            logger.warning("toolwatch: ignoring %s=%r: expected %s; the OpenTelemetry SDK's default is used", name,
                           raw, expected)
        hidden[name] = raw
    for name in hidden:
        del os.environ[name]
    try:
        yield
    finally:
        for name, raw in hidden.items():
            os.environ.setdefault(name, raw)


MILLIS_LIKE_SECONDS = 1000.0
"""An OTLP timeout of this many seconds or more (16 minutes) was most likely written in milliseconds."""


def warn_timeout_in_millis() -> None:
    """Warn when the OTLP timeout the exporter reads looks written in milliseconds, as the specification gives it: the
    Python exporters read seconds (10000 holds one export for hours against a receiver that never answers)."""
    for name in ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"):  # the exporter's order
        raw = os.environ.get(name)
        if raw is None:
            continue
        try:
            seconds = float(raw)
        except ValueError:
            return  # warned of where it is read
        if seconds >= MILLIS_LIKE_SECONDS:
            logger.warning("toolwatch: %s=%r is read as seconds by the Python OTLP exporter (%.0f minutes per export); "
                           "the specification's milliseconds would be %s=%s", name, raw, seconds / 60, name,
                           f"{seconds / 1000:g}")
        return
