"""`toolwatch serve`: OTLP in, turns judged, Prometheus out."""

from monitor.serve._pipeline import Pipeline
from monitor.serve._rules import JudgeLike, Rules
from monitor.serve._server import Server, ServerThread
from monitor.serve._settings import Settings, port_clash
from monitor.serve._verdict_log import VerdictLog, verdict_record

__all__ = [
    "JudgeLike",
    "Pipeline",
    "Rules",
    "Server",
    "ServerThread",
    "Settings",
    "VerdictLog",
    "port_clash",
    "verdict_record",
]
