"""FSCS-ART: exact selection, and on the triage example it finds the first failure sooner than random."""

from __future__ import annotations

import random
import re

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz.distance import Levenshtein

from monitor.cli.probe_cmd import probe
from monitor.evaluate import Harness, load_callable, load_judge
from monitor.probe import FscsSelector, first_failures, mean_first_failure, run_probe
from tests.monitor.offline.conftest import TRIAGE_RULES

# Loaded the way `--agent` / `--generator` load them (examples/ is not a package the type checker follows).
triage = load_callable("examples.triage.agent:triage")
generate = load_callable("examples.triage.generator:generate")

SEEDS = 50
MAX_RUNS = 300

texts = st.text(alphabet="abc [", max_size=10)


@settings(max_examples=200, deadline=None)
@given(tested=st.lists(texts, min_size=1, max_size=60), candidates=st.lists(texts, min_size=1, max_size=10),
       sample=st.sampled_from([1, 3, 48]))
def test_selection_is_the_max_min_candidate(tested: list[str], candidates: list[str], sample: int) -> None:
    sel = FscsSelector(seed=1, sample=sample)
    for t in tested:
        sel.add(t)
    mins = [min(Levenshtein.distance(c, t) for t in tested) for c in candidates]
    choice = sel.select(candidates)
    assert (choice.index, choice.distance) == (mins.index(max(mins)), max(mins))


def test_first_selection_and_empty_pool() -> None:
    sel = FscsSelector()
    assert sel.select(["x", "y"]).index == 0 and sel.select(["x"]).distance is None
    with pytest.raises(ValueError):
        sel.select([])


def test_art_reaches_the_first_failure_in_fewer_runs_than_random() -> None:
    judge = load_judge([TRIAGE_RULES])
    with Harness(agent_name="incident-triage") as h:
        ff = first_failures(generator=generate, agent=triage, judge=judge, harness=h, seeds=range(SEEDS), pool=10,
                            max_iterations=MAX_RUNS)
    art, rnd = mean_first_failure(ff["art"], MAX_RUNS), mean_first_failure(ff["random"], MAX_RUNS)
    print(f"\nmean runs to the first failure over {SEEDS} seeds (pool 10): art {art:.2f}, random {rnd:.2f}")
    assert all(v is not None for v in ff["art"] + ff["random"])
    assert art < rnd


def test_probe_loop_judges_every_run_and_strategies_differ() -> None:
    judge = load_judge([TRIAGE_RULES])
    with Harness(agent_name="incident-triage") as h:
        art = run_probe(generator=generate, agent=triage, judge=judge, harness=h, iterations=40, seed=3)
        rnd = run_probe(generator=generate, agent=triage, judge=judge, harness=h, iterations=40, seed=3,
                        strategy="random")
    assert len(art.steps) == len(rnd.steps) == 40
    assert all(s.verdict is not None and s.verdict.judged for s in art.steps + rnd.steps)
    # random runs the first candidate of each draw: replaying the generator gives the same inputs
    rng = random.Random(3)
    expected = []
    for _ in range(40):
        pool = [generate(rng) for _ in range(10)]
        expected.append(pool[0])
    assert [s.input_text for s in rnd.steps] == expected
    assert [s.input_text for s in art.steps] != expected
    assert all(s.distance is not None for s in art.steps[1:])


def test_cli_probe_prints_accuracy_and_comparison(tmp_path: object) -> None:
    res = CliRunner().invoke(probe, [
        "--generator", "examples.triage.generator:generate", "--agent", "examples.triage.agent:triage",
        "--rules", str(TRIAGE_RULES), "--iterations", "60", "--compare-seeds", "5", "--no-progress",
        "--seed", "7"])
    assert res.exit_code == 0, res.output
    assert re.search(r"^Tool call accuracy: \d+/\d+ \(\d+\.\d%\)$", res.output, re.M)
    assert re.search(r"art: mean runs to first failure over 5 seeds = \d+\.\d\d", res.output)
    assert re.search(r"random: mean runs to first failure over 5 seeds = \d+\.\d\d", res.output)
    for title in ("Failure rate by leading token", "Failure rate by input length", "Failure kinds",
                  "Failing inputs grouped by Levenshtein distance"):
        assert title in res.output


def broken_generator(rng: random.Random) -> str:
    raise RuntimeError("no more ideas")


def test_cli_probe_generator_error_is_reported() -> None:
    res = CliRunner().invoke(probe, [
        "--generator", "tests.monitor.offline.test_probe:broken_generator", "--agent", "examples.triage.agent:triage",
        "--rules", str(TRIAGE_RULES), "--iterations", "3", "--no-progress"])
    assert res.exit_code == 2 and "the generator raised RuntimeError: no more ideas" in res.output
