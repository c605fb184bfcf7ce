"""Labelled evaluation: run a user's agent on dataset cases under the instrumentation, judge, score trials."""

from monitor.evaluate._dataset import (
    Case,
    Dataset,
    load_dataset,
    load_dataset_rules,
    read_cases,
)
from monitor.evaluate._eval import EvalResult, Trial, run_eval
from monitor.evaluate._harness import (
    DEFAULT_TIMEOUT_S,
    AgentFn,
    DrainingExporter,
    Harness,
    Interrupted,
    RunResult,
    Terminated,
    cut_turn,
    stop_signal,
)
from monitor.evaluate._loader import (
    CASE_CALL,
    GENERATOR_CALL,
    PROBE_AGENT_CALL,
    STEP_CALL,
    Call,
    LoadError,
    agent_name_problem,
    default_agent_name,
    load_callable,
    load_judge,
)
from monitor.evaluate._tracing import route_global_tracing

__all__ = [
    "CASE_CALL",
    "DEFAULT_TIMEOUT_S",
    "GENERATOR_CALL",
    "PROBE_AGENT_CALL",
    "STEP_CALL",
    "AgentFn",
    "Call",
    "Case",
    "Dataset",
    "DrainingExporter",
    "EvalResult",
    "Harness",
    "Interrupted",
    "LoadError",
    "RunResult",
    "Terminated",
    "Trial",
    "cut_turn",
    "agent_name_problem",
    "default_agent_name",
    "load_callable",
    "load_dataset",
    "load_dataset_rules",
    "load_judge",
    "read_cases",
    "route_global_tracing",
    "run_eval",
    "stop_signal",
]
