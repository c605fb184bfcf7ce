"""Where failures cluster: failure rates by leading token and by input length, failure kinds, and groups of
failing runs: by what went wrong first (the expected tool -> the actual call, and the kind of mistake), then,
within such a group, by the similarity of the inputs.

Raw edit distance does not group probe failures: adaptive random testing picks the inputs farthest apart, and
log-like inputs differ in ids and numbers everywhere, so every failing input ends up alone. The mistake the
judge saw first is what the runs of one cause share (another subsystem's tag read -> the wrong tool; a quote
in the line -> malformed arguments); the inputs of such a group are then compared with numbers and hex ids
masked, by rapidfuzz's token-set ratio, and the tokens every member has are reported as the shared part.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from rapidfuzz import fuzz, process

from monitor.probe._loop import Step
from monitor.report.model import Table
from monitor.verdict import NONE_LABEL, Outcome, TurnVerdict

SIMILARITY = 40  # token-set ratio (0-100, numbers masked) at or above which a failing input joins a group
MAX_GROUPS = 12
MEDOID_SAMPLE = 200  # members compared to pick a group's representative input
# A failing input is compared with the leaders (first inputs) of at most this many groups of its problem: those
# joined or formed last. Grouping costs O(failures x MAX_LEADERS) comparisons, not O(failures x groups) (4,000
# dissimilar failures: 4,000 groups, 8 million comparisons); a group not joined while this many others were
# joined or formed since takes no more members (a later similar input starts a group of its own).
MAX_LEADERS = 100
MAX_SHAPED_CHARS = 2000  # inputs are compared on their first this many characters
NO_RULE = "(no rule)"
# 1504, 4/5, 0a50ece3ec; not us-west-2. Linear: the digit is found by a lookahead, not by backtracking between
# two hex runs (which took quadratic time on a long run of digits followed by a letter).
_NUMBER = re.compile(r"(?<![\w-])(?=[0-9a-fA-F]*\d)[0-9a-fA-F]+(?![\w-])")
_LETTER = re.compile(r"[^\W\d_]")
_TOKEN = re.compile(r"\[\w+\]|[\w.-]+=[\"']?|[\w./-]+|[^\w\s]")  # [AUTH], msg=", words, punctuation


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
    rows = [[k, str(runs[k]), str(fails[k]), f"{100 * fails[k] / runs[k]:.1f}%"] for k in order[:MAX_GROUPS]]
    if len(order) > MAX_GROUPS:  # one row per run when every input starts differently (a timestamp)
        rest = order[MAX_GROUPS:]
        title += (f" (first {MAX_GROUPS} of {len(order)} by failure rate; {sum(runs[k] for k in rest)} runs, "
                  f"{sum(fails[k] for k in rest)} failing, in the others)")
    return Table(title, [key_name, "runs", "failures", "failure rate"], rows)


def failure_kinds(steps: Sequence[Step]) -> Table:
    kinds: Counter[str] = Counter()
    example: dict[str, str] = {}
    for s in steps:
        if not s.failed:
            continue
        found: list[str] = []
        if s.error is not None or s.verdict is None:  # a run that raised or timed out after its calls: judged too
            found.append(f"run error: {_error_kind(s.error)}")
        if s.verdict is not None:
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
    ranked = kinds.most_common()
    rows = [[k, str(n), example[k][:120]] for k, n in ranked[:MAX_GROUPS]]
    title = "Failure kinds"
    if len(ranked) > MAX_GROUPS:  # made-up tool names have no bound
        title += f" (largest {MAX_GROUPS} of {len(ranked)})"
    return Table(title, ["kind", "failing runs", "example input"], rows)


# ---- what went wrong first ----


@dataclass(slots=True, frozen=True)
class Problem:
    """The first thing that went wrong in a failing run: the expected tool, the actual call, the kind."""

    expected: str  # an expected tool, "(none)", "(no rule)", or "" when no call is concerned
    actual: str  # the tool called, "(none)", or ""
    what: str  # wrong tool, made-up tool, extra call, missed call, arguments malformed, ...

    def __str__(self) -> str:
        return f"{self.expected} -> {self.actual}: {self.what}" if self.expected or self.actual else self.what


def _error_kind(error: str | None) -> str:
    text = (error or "failed").strip()
    head = text.split(":", 1)[0] if re.match(r"^[A-Za-z_][\w.]*:", text) else text
    return head[:60]


def _pairs(v: TurnVerdict) -> tuple[dict[int, str], list[str]]:
    """The missing unit each wrong-tool or hallucinated call stands in for (METRICS.md pairing), and the rest."""
    units = [m.tool for m in v.missed]
    paired: dict[int, str] = {}
    k = 0
    for kind in (Outcome.WRONG_TOOL, Outcome.HALLUCINATED):
        for i, c in enumerate(v.calls):
            if c.outcome is kind:
                paired[i] = units[k] if k < len(units) else NONE_LABEL
                k += k < len(units)
    return paired, units[k:]


def _call_problem(v: TurnVerdict, i: int, expected: str | None) -> Problem | None:
    c = v.calls[i]
    if c.outcome is Outcome.HALLUCINATED:
        return Problem(expected or NONE_LABEL, c.name, "made-up tool")
    if c.name in v.forbidden:
        return Problem(c.name if c.outcome is Outcome.CORRECT else NONE_LABEL, c.name, "forbidden tool")
    if c.outcome is Outcome.WRONG_TOOL:
        return Problem(expected or NONE_LABEL, c.name, "wrong tool")
    if c.outcome is Outcome.SPURIOUS:
        if any(o.name == c.name and o.outcome is Outcome.CORRECT for o in v.calls[:i]):
            return Problem(c.name, c.name, "extra call (a repeat)")
        return Problem(NONE_LABEL, c.name, "call where none is expected" if v.max_calls == 0 else "extra call")
    own = c.name if c.outcome is Outcome.CORRECT else NO_RULE
    if c.schema_valid is False:
        return Problem(own, c.name, f"arguments {','.join(sorted({x.kind.value for x in c.violations})) or 'invalid'}")
    if c.args_ok is False:
        bad = ", ".join(dict.fromkeys(r.argument for r in c.arg_results if not r.ok))
        return Problem(own, c.name, f"argument mismatch ({bad})" if bad else "argument mismatch")
    return None


def first_problem(step: Step) -> Problem:
    """What went wrong first in a failing run: its calls in order, then an agent error, a missed call, the
    order, the response; a run without a judged turn is a run error."""
    v = step.verdict
    if v is None:
        return Problem("", "", f"run error: {_error_kind(step.error)}")
    paired, unpaired = _pairs(v)
    for i in range(len(v.calls)):
        found = _call_problem(v, i, paired.get(i))
        if found is not None:
            return found
    if step.error:
        return Problem("", "", f"agent error: {_error_kind(step.error)}")
    if unpaired:
        return Problem(unpaired[0], NONE_LABEL, "missed call")
    if v.sequence_ok is False:
        return Problem("", "", "call order violated")
    if v.response_ok is False:
        return Problem("", "", "response check failed")
    return Problem("", "", v.reason[:80] or "failed")


# ---- groups ----


def shape(text: str) -> str:
    """The input's first MAX_SHAPED_CHARS characters with numbers and hex ids masked (`depth=1504` -> `depth=#`),
    as inputs are compared."""
    return _NUMBER.sub("#", text[:MAX_SHAPED_CHARS])


@dataclass(slots=True)
class FailureCluster:
    problem: Problem
    members: list[Step] = field(default_factory=list)
    representative: str = ""  # the member input most similar to the others
    shared: str = ""  # the tokens (numbers masked) every member input has, in the representative's order

    @property
    def size(self) -> int:
        return len(self.members)


def _representative(shapes: list[str]) -> int:
    sample = shapes[:MEDOID_SAMPLE]
    best, best_score = 0, -1.0
    for i, text in enumerate(sample):
        score = sum(s for _, s, _ in process.extract(text, sample, scorer=fuzz.token_set_ratio, limit=None))
        if score > best_score:
            best, best_score = i, score
    return best


def _shared(rep: str, shapes: list[str]) -> str:
    """The phrases of the representative that every member has: runs of tokens found in every member input, a
    token continuing its run only when every member has the two side by side too; each token once, and a run
    neither starts nor ends with a token without letters (a masked number, punctuation)."""
    tokens = _TOKEN.findall(rep)
    common, pairs = set(tokens), set(zip(tokens, tokens[1:], strict=False))
    for s in shapes:
        theirs = _TOKEN.findall(s)
        common &= set(theirs)
        pairs &= set(zip(theirs, theirs[1:], strict=False))
    runs: list[list[re.Match[str]]] = [[]]
    seen: set[str] = set()
    for m in _TOKEN.finditer(rep):
        token = m.group()
        if token not in common or token in seen:
            if runs[-1]:
                runs.append([])
            continue
        seen.add(token)
        if runs[-1] and (runs[-1][-1].group(), token) not in pairs:
            runs.append([])
        runs[-1].append(m)
    parts = []
    for run in runs:
        words = [i for i, m in enumerate(run) if _LETTER.search(m.group())]
        if words:
            parts.append(rep[run[words[0]].start() : run[words[-1]].end()])
    return " … ".join(parts)


def failure_clusters(steps: Sequence[Step]) -> list[FailureCluster]:
    """Failing runs grouped by what went wrong first, then by input similarity; the largest groups first."""
    by_problem: dict[Problem, list[Step]] = {}
    for s in steps:
        if s.failed:
            by_problem.setdefault(first_problem(s), []).append(s)
    clusters: list[FailureCluster] = []
    for problem, members in by_problem.items():
        leaders: dict[int, str] = {}  # group -> its first input, for the MAX_LEADERS groups joined or formed last
        groups: list[tuple[list[Step], list[str]]] = []
        for s in members:
            text = shape(s.input_text)
            hit = process.extractOne(text, leaders, scorer=fuzz.token_set_ratio, score_cutoff=SIMILARITY)
            if hit is None:
                leaders[len(groups)] = text
                groups.append(([s], [text]))
                if len(leaders) > MAX_LEADERS:
                    del leaders[next(iter(leaders))]
            else:
                g = hit[2]
                groups[g][0].append(s)
                groups[g][1].append(text)
                leaders[g] = leaders.pop(g)  # joined now: the last of the leaders to be dropped
        for group, shapes in groups:
            rep = _representative(shapes)
            shared = _shared(shapes[rep], shapes) if len(group) > 1 else ""
            clusters.append(FailureCluster(problem, group, group[rep].input_text, shared))
    clusters.sort(key=lambda c: (-c.size, c.members[0].iteration))  # ties: in the order of their first failing run
    return clusters


def failure_groups(steps: Sequence[Step], limit: int = MAX_GROUPS) -> Table:
    clusters = failure_clusters(steps)
    rows = [[str(n), str(c.size), str(c.problem), c.shared[:120] or "(one run)", c.representative[:140]]
            for n, c in enumerate(clusters[:limit], 1)]
    title = "Where failures cluster: what went wrong first, then similar inputs"
    if len(clusters) > limit:
        rest = sum(c.size for c in clusters[limit:])
        title += f" (largest {limit} of {len(clusters)} groups; {rest} failing runs in the others)"
    return Table(title, ["group", "failing runs", "what went wrong first", "shared part", "representative input"],
                 rows)


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
