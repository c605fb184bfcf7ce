"""Loads of rule files, datasets and scenarios collect young objects less often, and the thresholds come back.

A YAML load builds millions of short-lived, acyclic objects; with the default threshold (700) the collector ran
thousands of times during an 8,000-case dataset load, a quarter of its CPU time.
"""

from __future__ import annotations

import gc
import threading
from pathlib import Path

from monitor._gc import BATCH_GEN0, batch_gc
from monitor.evaluate import load_dataset_rules
from monitor.rules import load_rules
from monitor.scenario import load_scenarios

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "rules" / "incident-triage.yaml"


def _dataset(tmp_path: Path, n: int) -> Path:
    p = tmp_path / "cases.yaml"
    p.write_text("".join(
        f'- id: c{i}\n  input: "[AUTH] ERROR authd {i}"\n  call: [{{tool: pull_auth_telemetry, exactly: 1}}]\n'
        for i in range(n)), encoding="utf-8")
    return p


def test_loads_collect_young_objects_rarely(tmp_path: Path) -> None:
    """2,000 cases: about 250 collections at the default threshold; under the batch one, at most one as each load
    ends (what its objects left over the restored threshold)."""
    dataset = _dataset(tmp_path, 2000)
    before = gc.get_threshold()
    collections = 0

    def note(phase: str, info: dict[str, int]) -> None:
        nonlocal collections
        collections += phase == "start"

    gc.collect()
    gc.callbacks.append(note)
    try:
        load_rules([RULES])
        load_dataset_rules(dataset, [RULES])
        load_scenarios(ROOT / "examples" / "triage" / "scenario.yaml")
    finally:
        gc.callbacks.remove(note)
    assert collections <= 6, collections
    assert gc.get_threshold() == before


def test_overlapping_batches_keep_the_threshold_until_the_last_ends() -> None:
    """Another thread's batch starts first and ends first: each batch saving and restoring its own thresholds
    restored the default in the middle of this one, and left the raised value in force after both."""
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        entered, leave = threading.Event(), threading.Event()

        def other() -> None:
            with batch_gc():
                entered.set()
                leave.wait(10)

        t = threading.Thread(target=other)
        t.start()
        assert entered.wait(10)
        with batch_gc():
            leave.set()
            t.join()
            with batch_gc():
                assert gc.get_threshold()[0] == BATCH_GEN0
            assert gc.get_threshold()[0] == BATCH_GEN0
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*saved)


def test_an_application_that_turned_automatic_collection_off_keeps_it_off() -> None:
    """gc.set_threshold(0) turns automatic collection off; a batch raised it to 50,000, turning it back on."""
    saved = gc.get_threshold()
    gc.set_threshold(0, 10, 10)
    try:
        with batch_gc():
            assert gc.get_threshold()[0] == 0
        assert gc.get_threshold() == (0, 10, 10)
    finally:
        gc.set_threshold(*saved)
