"""Adaptive random probing: FSCS-ART over a user's input generator, judged like live traffic."""

from monitor.probe._clusters import cluster_tables
from monitor.probe._loop import (
    STRATEGIES,
    Generator,
    GeneratorError,
    ProbeResult,
    Step,
    first_failures,
    mean_first_failure,
    run_probe,
)
from monitor.probe.fscs import Choice, FscsSelector

__all__ = [
    "STRATEGIES",
    "Choice",
    "FscsSelector",
    "Generator",
    "GeneratorError",
    "ProbeResult",
    "Step",
    "cluster_tables",
    "first_failures",
    "mean_first_failure",
    "run_probe",
]
