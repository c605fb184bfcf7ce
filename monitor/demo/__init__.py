"""The live demo, and its parts for reuse: the incident-triage log lines, a simulated model with realistic
mistakes, and the instrumented agent.

Reuse (e.g. a probe over the simulated agent)::

    from monitor.demo import LogLineGenerator, SimulatedTriageModel, TriageAgent, MistakeRates
    agent = TriageAgent(SimulatedTriageModel(seed=1, rates=MistakeRates()))
    for line in LogLineGenerator(seed=1).lines(100):
        result = agent.run(line)            # spans go to whatever `instrumentation.configure()` set up
        result.response.mistakes             # what the simulation did wrong on this turn

`LogLine.expected_tool` is the right call for a line; `MistakeRates.perfect()` makes a model without mistakes.
"""

from monitor.demo._agent import AGENT_NAME, TriageAgent, TurnResult
from monitor.demo._logs import TAGS, TOOL_OF_TAG, LogLine, LogLineGenerator
from monitor.demo._model import MADE_UP_TOOLS, MistakeRates, ModelResponse, SimulatedTriageModel
from monitor.demo._run import DEFAULT_RULES, DemoResult, print_summary, run_demo
from monitor.demo._tools import TRIAGE_TOOLS, triage_executor

__all__ = [
    "AGENT_NAME",
    "DEFAULT_RULES",
    "MADE_UP_TOOLS",
    "TAGS",
    "TOOL_OF_TAG",
    "TRIAGE_TOOLS",
    "DemoResult",
    "LogLine",
    "LogLineGenerator",
    "MistakeRates",
    "ModelResponse",
    "SimulatedTriageModel",
    "TriageAgent",
    "TurnResult",
    "print_summary",
    "run_demo",
    "triage_executor",
]
