"""Turn assembly: tool calls grouped under their agent turn, released when complete."""

from monitor.assembly._assembler import AssemblerStats, TurnAssembler

__all__ = ["AssemblerStats", "TurnAssembler"]
