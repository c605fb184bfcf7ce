"""Adaptive random probing: FSCS-ART over a user's input generator, judged like live traffic."""

from monitor.probe._clusters import FailureCluster, Problem, cluster_tables, failure_clusters, first_problem
from monitor.probe._loop import (
    MAX_POOL,
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
    "MAX_POOL",
    "STRATEGIES",
    "Choice",
    "FailureCluster",
    "FscsSelector",
    "Generator",
    "GeneratorError",
    "ProbeResult",
    "Problem",
    "Step",
    "cluster_tables",
    "failure_clusters",
    "first_failures",
    "first_problem",
    "mean_first_failure",
    "run_probe",
]
