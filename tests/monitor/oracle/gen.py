"""Seeded generator of realistic turns for SPEC: mostly right, with the usual mistakes mixed in."""

from __future__ import annotations

import json
import random

from tests.monitor.oracle.oracle import OCall, OTurn
from tests.monitor.oracle.spec import SPEC, Spec

AGENTS = ("alpha", "beta", "gamma", "")  # gamma and "" are not label values: __other__
PREFIXES = ("[A]", "[AB]", "[2]", "[OPT]", "[NONE]", "[ANY]", "[RESP]", "[B]", "hello", "  [A]", "[a]")
MADE_UP = ("t9", "search_web", "T0", "t0 ", "__other__", "(none)", "(unknown)", "ext_lookup", "x" * 300)
OFFERED = ("ext_lookup", "ext_mail")

_GOOD: dict[str, list[dict[str, object]]] = {
    "t0": [{"q": "x"}, {"q": "y"}, {"q": "x", "n": 2}],
    "t1": [{"mode": "fast"}, {}],
    "t2": [{}, {"any": 1}],
    "t3": [{"n": 1}],
    "t4": [{}],
}
_BAD = ['{"q": ', "[1]", '{"n": "one"}', '{"mode": "warp"}', '{"q": 5, "extra": true}', "{}", "null"]


def _arguments(rng: random.Random, name: str) -> str | None:
    roll = rng.random()
    if roll < 0.08:
        return None  # content capture off
    if roll < 0.25:
        return rng.choice(_BAD)
    return json.dumps(rng.choice(_GOOD.get(name, [{}])))


def _expected_names(prefix: str, rng: random.Random) -> list[str]:
    p = prefix.strip()
    return {
        "[A]": ["t0"],
        "[AB]": ["t0", "t1"],
        "[2]": ["t2", "t2"],
        "[OPT]": ["t1"] if rng.random() < 0.5 else [],
        "[NONE]": [],
        "[ANY]": rng.choice([["t3"], ["t1", "t2"], ["t2", "t1"]]),
        "[RESP]": ["t4"] * rng.randint(1, 3),
        "[B]": ["t3", "t2"] if rng.random() < 0.5 else ["t3"],
    }.get(p, [rng.choice(["t0", "t1", "t2"])] if rng.random() < 0.7 else [])


def _mistakes(rng: random.Random, names: list[str], spec: Spec) -> list[str]:
    tools = sorted(spec.tools)
    roll = rng.random()
    if roll < 0.45 or not names and roll < 0.6:
        return names
    if roll < 0.55 and names:
        names = names[:-1]  # a missed call
    elif roll < 0.65 and names:
        names = [*names, rng.choice(names)]  # a double call
    elif roll < 0.75 and names:
        i = rng.randrange(len(names))
        names = [*names[:i], rng.choice(tools), *names[i + 1:]]  # a substitution (maybe the same tool)
    elif roll < 0.85:
        names = [*names, rng.choice(MADE_UP)]  # a made-up name
    elif roll < 0.92:
        names = [*names, rng.choice(tools)]  # an extra call
    else:
        names = list(reversed(names)) + ([rng.choice(OFFERED)] if rng.random() < 0.5 else [])
    return names


def turns(seed: int, n: int, spec: Spec = SPEC) -> list[OTurn]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if rng.random() < 0.06:  # calls whose turn never arrives
            names = [rng.choice([*spec.tools, *MADE_UP[:3]]) for _ in range(rng.randint(1, 2))]
            calls = tuple(OCall(x, _arguments(rng, x)) for x in names)
            out.append(OTurn("", f"turnless {i}", calls, turnless=True))
            continue
        prefix = rng.choice(PREFIXES)
        names = _mistakes(rng, _expected_names(prefix, rng), spec)
        text = f"{prefix} case {i}" + (" allow" if rng.random() < 0.3 else "")
        output = rng.choice([None, "Result: done", "all good", "Result: x\nmore"])
        offered = tuple(rng.sample(OFFERED, rng.randint(1, 2))) if rng.random() < 0.3 else ()
        calls = tuple(OCall(x, _arguments(rng, x)) for x in names[:6])
        out.append(OTurn(rng.choice(AGENTS), text, calls, output, offered))
    return out
