"""Oracle rule files: loading, validation and the compiled, immutable RuleSet."""

from monitor.rules._burn import DEFAULT_BURN_WINDOWS, BurnWindow, duration_problem, objective_problem, parse_duration
from monitor.rules._compile import CHECK_MODES, PER_TOOL_FIGURES, UNDIRECTED_FIGURES
from monitor.rules._errors import RuleFileError
from monitor.rules._load import distinct_files, load_rules
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
from monitor.rules._read import Documents, read_json_lines, read_text
from monitor.rules._validate import rule_file_schema
from monitor.rules._yaml import load_yaml

__all__ = [
    "CHECK_MODES",
    "DEFAULT_BURN_WINDOWS",
    "PER_TOOL_FIGURES",
    "UNDIRECTED_FIGURES",
    "Alert",
    "Alternative",
    "BurnWindow",
    "ArgCheck",
    "Condition",
    "Documents",
    "Expectation",
    "Forbid",
    "Respond",
    "RuleFileError",
    "RuleSet",
    "Slot",
    "Tool",
    "distinct_files",
    "load_rules",
    "load_yaml",
    "duration_problem",
    "objective_problem",
    "parse_duration",
    "read_json_lines",
    "read_text",
    "rule_file_schema",
]
