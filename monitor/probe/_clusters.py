"""Where failures cluster: failure rates by leading token and by input length, failure kinds, and groups
of failing inputs close to each other in Levenshtein distance."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from rapidfuzz.distance import Levenshtein

from monitor.probe._loop import Step
from monitor.report.model import Table
from monitor.verdict import Outcome

CLUSTER_DISTANCE = 0.4  # normalized Levenshtein distance within which a failing input joins a group
MAX_GROUPS = 12


def _lead(text: str) -> str:
    token = text.strip().split(maxsplit=1)[0] if text.strip() else "(empty)"
    return token[:24]


def _bucket(n: int) -> str:
    lo = 0
    hi = 32
    while n >= hi:
        lo, hi = hi, hi * 2
    return f"{lo}-{hi - 1}"


def _rate_table(title: str, key_name: str, keys: Sequence[str], steps: Sequence[Step]) -> Table:
    runs: Counter[str] = Counter()
    fails: Counter[str] = Counter()
    for key, s in zip(keys, steps, strict=True):
        runs[key] += 1
        fails[key] += s.failed
    order = sorted(runs, key=lambda k: (-fails[k] / runs[k], -runs[k], k))
    rows = [[k, str(runs[k]), str(fails[k]), f"{100 * fails[k] / runs[k]:.1f}%"] for k in order]
    return Table(title, [key_name, "runs", "failures", "failure rate"], rows)


def failure_kinds(steps: Sequence[Step]) -> Table:
    kinds: Counter[str] = Counter()
    example: dict[str, str] = {}
    for s in steps:
        if not s.failed:
            continue
        found: list[str] = []
        if s.verdict is None:
            found.append(f"run error: {(s.error or '')[:60]}")
        else:
            v = s.verdict
            for c in v.calls:
                if c.outcome is Outcome.HALLUCINATED:
                    found.append(f"hallucinated {c.name}")
                elif c.outcome in (Outcome.WRONG_TOOL, Outcome.SPURIOUS):
                    found.append(f"{c.outcome.value} {c.name}")
                if c.schema_valid is False:
                    kinds_ = ",".join(sorted({x.kind.value for x in c.violations})) or "invalid"
                    found.append(f"schema {kinds_} ({c.name})")
            found += [f"missed {m.tool}" for m in v.missed]
            if v.response_ok is False:
                found.append("response check failed")
            if v.args_ok is False:
                found.append("argument check failed")
        for k in dict.fromkeys(found):
            kinds[k] += 1
            example.setdefault(k, s.input_text)
    rows = [[k, str(n), example[k][:120]] for k, n in kinds.most_common()]
    return Table("Failure kinds", ["kind", "failing runs", "example input"], rows)


def failure_groups(steps: Sequence[Step]) -> Table:
    """Greedy leader clustering of failing inputs by normalized Levenshtein distance."""
    leaders: list[str] = []
    members: defaultdict[int, list[str]] = defaultdict(list)
    for s in steps:
        if not s.failed:
            continue
        for i, lead in enumerate(leaders):
            if Levenshtein.normalized_distance(s.input_text, lead) <= CLUSTER_DISTANCE:
                members[i].append(s.input_text)
                break
        else:
            leaders.append(s.input_text)
            members[len(leaders) - 1].append(s.input_text)
    order = sorted(members, key=lambda i: -len(members[i]))[:MAX_GROUPS]
    rows = [[str(n + 1), str(len(members[i])), leaders[i][:140]] for n, i in enumerate(order)]
    return Table("Failing inputs grouped by Levenshtein distance", ["group", "failing runs", "first input"], rows)


def cluster_tables(steps: Sequence[Step]) -> list[Table]:
    if not steps:
        return []
    tables = [
        _rate_table("Failure rate by leading token", "leading token", [_lead(s.input_text) for s in steps], steps),
        _rate_table("Failure rate by input length", "length (chars)", [_bucket(len(s.input_text)) for s in steps],
                    steps),
    ]
    if any(s.failed for s in steps):
        tables += [failure_kinds(steps), failure_groups(steps)]
    return tables
