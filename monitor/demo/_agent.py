"""The incident-triage agent: one turn per log line, instrumented with `instrumentation`."""

from __future__ import annotations

from dataclasses import dataclass

from instrumentation import ToolExecutor, agent_turn
from monitor.demo._logs import LogLine
from monitor.demo._model import ModelResponse, SimulatedTriageModel
from monitor.demo._tools import triage_executor

AGENT_NAME = "incident-triage"  # the agent of rules/incident-triage.yaml


@dataclass(frozen=True, slots=True)
class TurnResult:
    line: LogLine
    response: ModelResponse
    answer: str


class TriageAgent:
    """Runs turns: `invoke_agent incident-triage` span, the model's calls as `execute_tool` spans, the answer."""

    def __init__(self, model: SimulatedTriageModel, executor: ToolExecutor | None = None) -> None:
        self.model = model
        self.executor = executor or triage_executor()

    def run(self, line: LogLine) -> TurnResult:
        with agent_turn(line.text, agent=AGENT_NAME, tools=self.executor) as turn:
            response = self.model.respond(line)
            results = self.executor.execute_tool_calls(response.tool_calls)
            answer = self.model.answer(line, [r.content for r in results], response)
            turn.set_output(answer)
        return TurnResult(line, response, answer)
