"""Multi-step scenarios: conversation steps with expected tool calls and response checks, free-run or step-wise."""

from monitor.scenario._model import Scenario, ScenarioError, ScenarioFile, Step, load_scenarios
from monitor.scenario._runner import (
    MODES,
    ScenarioRun,
    StepResult,
    agent_name_conflict,
    build_judge,
    forbidden_step_arguments,
    load_and_build,
    own_reply_steps,
    run_scenarios,
    step_case,
)

__all__ = [
    "MODES",
    "Scenario",
    "ScenarioError",
    "ScenarioFile",
    "ScenarioRun",
    "Step",
    "StepResult",
    "agent_name_conflict",
    "build_judge",
    "forbidden_step_arguments",
    "load_and_build",
    "load_scenarios",
    "own_reply_steps",
    "run_scenarios",
    "step_case",
]
