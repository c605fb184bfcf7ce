"""Oracle rule files: loading, validation and the compiled, immutable RuleSet."""

from monitor.rules._burn import DEFAULT_BURN_WINDOWS, BurnWindow, objective_problem
from monitor.rules._compile import CHECK_MODES, PER_TOOL_FIGURES
from monitor.rules._errors import RuleFileError
from monitor.rules._load import load_rules
from monitor.rules._model import (
    Alert,
    Alternative,
    ArgCheck,
    Condition,
    Expectation,
    Forbid,
    Respond,
    RuleSet,
    Slot,
    Tool,
)
from monitor.rules._validate import rule_file_schema

__all__ = [
    "CHECK_MODES",
    "DEFAULT_BURN_WINDOWS",
    "PER_TOOL_FIGURES",
    "Alert",
    "Alternative",
    "BurnWindow",
    "ArgCheck",
    "Condition",
    "Expectation",
    "Forbid",
    "Respond",
    "RuleFileError",
    "RuleSet",
    "Slot",
    "Tool",
    "load_rules",
    "objective_problem",
    "rule_file_schema",
]
