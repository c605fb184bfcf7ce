"""Replay captured spans (OTLP JSON lines, OTLP protobuf files, directories) through the live judge path."""

from monitor._gc import batch_gc
from monitor.replay._engine import JudgeLike, Replayer, ReplayStats, replay_files
from monitor.replay._framing import ZstdTooLarge, unzstd
from monitor.replay._sources import (
    FORMATS,
    STDIN,
    BadRecord,
    BadRecords,
    SourceError,
    detect_format,
    expand_sources,
    is_stream,
    read_source,
    total_bytes,
)

__all__ = [
    "FORMATS",
    "STDIN",
    "BadRecord",
    "BadRecords",
    "JudgeLike",
    "ReplayStats",
    "Replayer",
    "SourceError",
    "ZstdTooLarge",
    "batch_gc",
    "detect_format",
    "expand_sources",
    "is_stream",
    "read_source",
    "replay_files",
    "total_bytes",
    "unzstd",
]
