"""A simulated incident-triage agent with realistic flaws, instrumented with toolwatch's `@tool`.

It stands in for an LLM that routes a log line to the telemetry tool of the subsystem in its leading tag
(rules/incident-triage.yaml). Its mistakes depend on the input, the way a model's do:
- long lines that mention another subsystem inside the body pull it to that subsystem's tool;
- a large queue depth makes it pull telemetry twice ("to be sure");
- a quoted message in the line breaks its hand-built argument JSON (malformed arguments);
- SEV1 lines make it page an on-call tool that does not exist;
- very long lines make it give up without calling anything.

`triage(line)` is the probe and eval agent (`--agent examples.triage.agent:triage`): it runs inside the
`agent_turn` the harness opens and returns the final answer with its `Result: ...` line.

Why not the live demo's simulated model (`monitor.demo`)? Its mistakes are drawn at random on every turn,
whatever the input, which suits a live view; a probe needs mistakes that depend on the input, as a real
model's do, or no input-selection strategy can find them sooner than another. The tools themselves are the
demo's five `@tool` functions, run through a `ToolExecutor`.
"""

from __future__ import annotations

import json
import re

from monitor.demo import TOOL_OF_TAG as TOOL_OF
from monitor.demo import triage_executor

_LEAD = re.compile(r"^\s*\[([A-Z]{4})\]")
_INNER = re.compile(r"\[([A-Z]{4})\]")
_DEPTH = re.compile(r"depth=(\d+)")

# The five instrumented telemetry tools are the live demo's (`monitor.demo`); only the model differs.
EXECUTOR = triage_executor()


def plan(line: str) -> list[tuple[str, str]]:
    """The simulated model's tool calls for a line: (tool name, raw argument JSON) in call order."""
    lead = _LEAD.match(line)
    if lead is None or lead.group(1) not in TOOL_OF:
        return []
    if len(line) > 230:
        return []  # gives up on very long lines
    target = TOOL_OF[lead.group(1)]
    inner = [t for t in _INNER.findall(line[lead.end():]) if t in TOOL_OF and t != lead.group(1)]
    if inner and len(line) > 110:
        target = TOOL_OF[inner[-1]]  # drawn to the tag it read last
    excerpt = line[:200]
    if '"' in line:
        args = '{"log_excerpt": "' + excerpt + '"}'  # hand-built JSON, broken by the quotes
    else:
        args = json.dumps({"log_excerpt": excerpt, "window_minutes": 15})
    calls = [(target, args)]
    depth = _DEPTH.search(line)
    if depth is not None and int(depth.group(1)) > 600:
        calls.append((target, json.dumps({"log_excerpt": excerpt, "window_minutes": 60})))
    if " SEV1 " in line:
        calls.append(("page_oncall", json.dumps({"summary": excerpt[:80]})))
    return calls


def triage(line: str, history: list[dict[str, str]] | None = None) -> str:
    """Route one log line: run the planned calls through the executor and answer with a Result line.

    `history` (earlier messages, given by scenario runs) does not change the routing of a line.
    """
    called = []
    for n, (name, args) in enumerate(plan(line)):
        EXECUTOR.execute(name, args, call_id=f"call_{n}")
        called.append(name)
    if not called:
        return "I could not find a telemetry source for this line."
    return f"Pulled {', '.join(called)}.\nResult: routed to {called[0]}"
