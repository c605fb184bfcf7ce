"""Turn assembly: tool calls grouped under their agent turn, released when complete."""

from monitor.assembly._assembler import DEFAULT_MAX_PENDING_BYTES, AssemblerStats, TurnAssembler, records_bytes

__all__ = ["DEFAULT_MAX_PENDING_BYTES", "AssemblerStats", "TurnAssembler", "records_bytes"]
