"""Process tuning of `toolwatch serve` (monitor/serve/_memory.py), above all the cache of freed pymalloc arenas
(monitor/serve/_carena.c).

Each case runs in a fresh interpreter (the arena allocator and the collector's thresholds are process-wide): a burst
of small objects is made, freed, and made again, and the page faults the process took (getrusage) and the cache's
counters show whether the second burst reused the first one's memory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]

PRELUDE = """
import gc, json, resource
from monitor.serve import _memory

def faults(fn):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    out = fn()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before, out

def burst():  # ~60 MiB of small objects: tuples, ints and strings, all in pymalloc arenas
    return [(i, str(i) * 3) for i in range(400_000)]
"""


def run(script: str, **env: str) -> Any:
    """Runs PRELUDE + script in a fresh interpreter; returns what it printed as JSON."""
    proc = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, **env},
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(autouse=True)
def _built() -> None:
    pytest.importorskip("monitor.serve._carena", reason="the C arena cache was not built")


def test_a_second_burst_reuses_the_first_ones_arenas_instead_of_faulting_them_in_again() -> None:
    out = run(
        """
        without_first, data = faults(burst)
        del data
        without_second, data = faults(burst)
        del data
        assert _memory.cache_arenas(256 << 20)
        first, data = faults(burst)
        del data
        cached_after_free = _memory.arena_stats()[0]
        second, data = faults(burst)
        cached, reused, mapped, unmapped = _memory.arena_stats()
        print(json.dumps(dict(without=[without_first, without_second], first=first, second=second,
                              cached_after_free=cached_after_free, reused=reused, mapped=mapped, unmapped=unmapped)))
        """
    )
    # Without the cache, pymalloc unmaps the arenas of a freed burst: the next burst faults as much in again.
    assert out["without"][1] > out["without"][0] * 0.7, out
    # With it, the freed arenas stay mapped (tens of MiB), and the next burst takes them instead of new ones.
    assert out["cached_after_free"] >= 32 << 20, out
    assert out["reused"] >= 32, out
    assert out["second"] < out["first"] / 4, out
    assert out["second"] < out["without"][1] / 4, out
    assert out["unmapped"] == 0, out


def test_the_cache_keeps_no_more_than_its_bound_and_a_lower_bound_unmaps_the_rest() -> None:
    out = run(
        """
        _memory.cache_arenas(4 << 20)
        data = burst()
        del data
        small = _memory.arena_stats()
        _memory.cache_arenas(0)
        none = _memory.arena_stats()
        _memory.cache_arenas(64 << 20)  # again: a new bound, the same allocator
        data = burst()
        del data
        again = _memory.arena_stats()
        print(json.dumps(dict(small=small, none=none, again=again)))
        """
    )
    cached, _, _, unmapped = out["small"]
    assert 0 < cached <= 4 << 20, out
    assert unmapped >= 20, out  # the rest of the ~60 MiB went back to the system
    assert out["none"][0] == 0 and out["none"][3] > unmapped, out
    assert 32 << 20 <= out["again"][0] <= 64 << 20, out


def test_a_negative_bound_is_refused() -> None:
    from monitor.serve import _memory

    with pytest.raises(ValueError, match="max_bytes"):
        _memory.cache_arenas(-1)


@pytest.mark.parametrize("setting", ["1", "0"])
def test_tune_process_tunes_collection_and_memory_unless_turned_off(setting: str) -> None:
    out = run(
        """
        default = gc.get_threshold()
        tuned = _memory.tune_process()
        data = burst()
        del data
        print(json.dumps(dict(tuned=tuned, default=default, threshold=gc.get_threshold(),
                              frozen=gc.get_freeze_count(), cached=_memory.arena_stats()[0])))
        """,
        TOOLWATCH_GC_TUNING=setting,
    )
    if setting == "0":
        assert out["tuned"] is False
        assert out["threshold"] == out["default"] and out["frozen"] == 0 and out["cached"] == 0, out
    else:
        assert out["tuned"] is True
        assert out["threshold"] == [200_000, 100, 100] and out["frozen"] > 0, out
        assert out["cached"] >= 32 << 20, out
