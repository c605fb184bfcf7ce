"""Oracle turns as the project's records, and the rule files on disk."""

from __future__ import annotations

from pathlib import Path

from monitor.records import ToolCall, Turn
from tests.monitor.oracle.oracle import OTurn
from tests.monitor.oracle.spec import Spec, rule_files


def write_rules(spec: Spec, folder: Path) -> list[Path]:
    paths = []
    for name, text in rule_files(spec).items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


def definitions(names: tuple[str, ...]) -> tuple[dict[str, str], ...] | None:
    return tuple({"type": "function", "name": n} for n in names) or None


def record(t: OTurn, i: int = 0) -> Turn:
    calls = tuple(
        ToolCall(c.name, call_id=f"c{i}_{j}", arguments=c.arguments, trace_id=f"{i:032x}", span_id=f"{j + 1:016x}")
        for j, c in enumerate(t.calls)
    )
    return Turn(
        t.input_text, calls, agent=t.agent, trace_id=f"{i:032x}", output_text=t.output,
        tool_definitions=definitions(t.offered), turnless=t.turnless,
    )
