"""Labelled evaluation: run a user's agent on dataset cases under the instrumentation, judge, score trials."""

from monitor.evaluate._dataset import Case, load_dataset_rules, read_cases
from monitor.evaluate._eval import EvalResult, Trial, run_eval
from monitor.evaluate._harness import AgentFn, DrainingExporter, Harness, RunResult
from monitor.evaluate._loader import LoadError, default_agent_name, load_callable, load_judge

__all__ = [
    "AgentFn",
    "Case",
    "DrainingExporter",
    "EvalResult",
    "Harness",
    "LoadError",
    "RunResult",
    "Trial",
    "default_agent_name",
    "load_callable",
    "load_dataset_rules",
    "load_judge",
    "read_cases",
    "run_eval",
]
