"""A simulated tool-calling model for incident triage, with the mistakes real models make.

Mistakes, each with its own rate: drawn to a tag mentioned inside the log body (calls that subsystem's
tool instead), a double call, malformed argument JSON, a made-up tool name, a skipped call (answers
without pulling telemetry), and a final answer without the required `Result:` line. Tool calls come in
the OpenAI chat-completions shape, so `ToolExecutor.execute_tool_calls` runs them as a real agent would.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from monitor.demo._logs import TOOL_OF_TAG, LogLine

MADE_UP_TOOLS = (
    "pull_telemetry",
    "get_auth_logs",
    "pull_incident_telemetry",
    "query_metrics",
    "pull_payment_telemetry",
)


@dataclass(frozen=True, slots=True)
class MistakeRates:
    distracted: float = 0.12  # of lines that mention another tag: call that tag's tool instead
    double_call: float = 0.03
    malformed_args: float = 0.02
    made_up_tool: float = 0.015
    skipped_call: float = 0.02
    no_result_line: float = 0.02

    @classmethod
    def perfect(cls) -> MistakeRates:
        return cls(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


@dataclass(slots=True)
class ModelResponse:
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    mistakes: list[str] = field(default_factory=list)  # what the simulation did wrong, for tests and probes


class SimulatedTriageModel:
    """Decides the tool calls for a log line and writes the final answer. Reproducible with `seed`."""

    def __init__(self, seed: int = 0, rates: MistakeRates | None = None) -> None:
        self.rng = random.Random(seed)
        self.rates = rates or MistakeRates()
        self._ids = 0

    def _call(self, name: str, arguments: str) -> dict[str, Any]:
        self._ids += 1
        return {"id": f"call_{self._ids:08d}", "type": "function", "function": {"name": name, "arguments": arguments}}

    def respond(self, line: LogLine) -> ModelResponse:
        """The tool calls the model asks for on this line (in the chat-completions shape)."""
        rng, r = self.rng, self.rates
        out = ModelResponse()
        if rng.random() < r.skipped_call:
            out.mistakes.append("skipped_call")
            return out
        tool = line.expected_tool
        if line.mentions and rng.random() < r.distracted:
            tool = TOOL_OF_TAG[line.mentions[0]]
            out.mistakes.append("distracted")
        if rng.random() < r.made_up_tool:
            tool = rng.choice(MADE_UP_TOOLS)
            out.mistakes.append("made_up_tool")
        excerpt = line.text.split("] ", 1)[-1][:200]
        args = json.dumps({"log_excerpt": excerpt, "window_minutes": rng.choice((15, 30, 60))})
        if rng.random() < r.malformed_args:
            args = args[: rng.randint(5, len(args) - 2)]  # cut off mid-object, as a truncated generation
            out.mistakes.append("malformed_args")
        out.tool_calls.append(self._call(tool, args))
        if rng.random() < r.double_call:
            out.tool_calls.append(self._call(tool, args))
            out.mistakes.append("double_call")
        return out

    def answer(self, line: LogLine, results: list[str], response: ModelResponse) -> str:
        """The final answer after the tool results; normally ends with a `Result: ...` line."""
        summary = f"Triaged {line.tag} incident using {len(results)} telemetry pull(s)."
        if self.rng.random() < self.rates.no_result_line:
            response.mistakes.append("no_result_line")
            return summary
        return f"{summary}\nResult: {line.tag.lower()} subsystem degraded"
