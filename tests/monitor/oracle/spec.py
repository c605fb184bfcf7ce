"""The rules the oracle tests use, as plain data, and the rule files written from them.

Written from METRICS.md, not from the project's rule model: slots (tool, min, max, exact argument checks),
`any_of` alternatives (an empty one is `none`), ordering sequences, a response check and forbid rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml


@dataclass(frozen=True)
class Slot:
    tool: str
    min: int = 1
    max: int | None = 1
    args: tuple[tuple[str, Any], ...] = ()  # exact checks


@dataclass(frozen=True)
class Rule:
    id: str
    prefix: str
    alternatives: tuple[tuple[Slot, ...], ...]  # () in the tuple: `none`
    orders: tuple[tuple[str, ...], ...] = ()
    respond_contains: str | None = None
    agent: str | None = None  # the rule file's agent scope


@dataclass(frozen=True)
class Forbid:
    tool: str
    unless_contains: str | None = None


@dataclass(frozen=True)
class Spec:
    tools: dict[str, dict[str, Any] | None]
    rules: tuple[Rule, ...]
    forbid: tuple[Forbid, ...] = ()
    from_definitions: bool = False
    agents: tuple[str, ...] = field(default=())  # agents configured besides the rule files' (--agent)

    def rules_for(self, agent: str) -> list[Rule]:
        """Scoped rules apply to their agent's turns and to turns without an agent name."""
        return [r for r in self.rules if r.agent is None or not agent or r.agent == agent]

    @property
    def label_agents(self) -> frozenset[str]:
        return frozenset(self.agents) | {r.agent for r in self.rules if r.agent is not None}


def _slot(s: Slot) -> dict[str, Any]:
    out: dict[str, Any] = {"tool": s.tool}
    if s.min == s.max:
        out["exactly"] = s.min
    else:
        out["min"] = s.min
        if s.max is not None:
            out["max"] = s.max
    if s.args:
        out["args"] = {k: {"exact": v} for k, v in s.args}
    return out


def _rule(r: Rule) -> dict[str, Any]:
    out: dict[str, Any] = {"id": r.id, "when": {"prefix": r.prefix}}
    if len(r.alternatives) == 1:
        alt = r.alternatives[0]
        if alt:
            out["call"] = [_slot(s) for s in alt]
        else:
            out["none"] = True
    else:
        out["any_of"] = [{"call": [_slot(s) for s in alt]} if alt else {"none": True} for alt in r.alternatives]
    if r.orders:
        out["order"] = [list(o) for o in r.orders]
    if r.respond_contains is not None:
        out["respond"] = [{"contains": r.respond_contains}]
    return out


def rule_files(spec: Spec) -> dict[str, str]:
    """File name -> YAML text: the catalog, unscoped rules and forbid rules in `main.yaml`, each agent's scoped
    rules in a file of their own."""
    tools = []
    for name, schema in spec.tools.items():
        tools.append({"name": name} if schema is None else {"name": name, "schema": schema})
    main: dict[str, Any] = {
        "version": 1,
        "catalog": {"from_definitions": spec.from_definitions, "tools": tools},
        "expect": [_rule(r) for r in spec.rules if r.agent is None],
    }
    if spec.forbid:
        main["forbid"] = [
            {"tool": f.tool, **({"unless": {"contains": f.unless_contains}} if f.unless_contains else {})}
            for f in spec.forbid
        ]
    files = {"main.yaml": yaml.safe_dump(main, sort_keys=False)}
    for agent in sorted({r.agent for r in spec.rules if r.agent is not None}):
        doc = {"version": 1, "agent": agent, "expect": [_rule(r) for r in spec.rules if r.agent == agent]}
        files[f"{agent}.yaml"] = yaml.safe_dump(doc, sort_keys=False)
    return files


OBJ_Q = {
    "type": "object",
    "properties": {"q": {"type": "string"}, "n": {"type": "integer"}},
    "required": ["q"],
    "additionalProperties": False,
}
OBJ_MODE = {"type": "object", "properties": {"mode": {"enum": ["fast", "slow"]}}}
OBJ_N = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

SPEC = Spec(
    tools={"t0": OBJ_Q, "t1": OBJ_MODE, "t2": None, "t3": OBJ_N, "t4": None},
    rules=(
        Rule("ra", "[A]", ((Slot("t0", args=(("q", "x"),)),),)),
        Rule("rab", "[AB]", ((Slot("t0"), Slot("t1")),), orders=(("t0", "t1"),)),
        Rule("r2", "[2]", ((Slot("t2", 2, 2),),)),
        Rule("ropt", "[OPT]", ((Slot("t1", 0, 1),),)),
        Rule("rnone", "[NONE]", ((),)),
        Rule("rany", "[ANY]", ((Slot("t3"),), (Slot("t1"), Slot("t2")))),
        Rule("rresp", "[RESP]", ((Slot("t4", 1, None),),), respond_contains="Result:"),
        Rule("rb", "[B]", ((Slot("t3"), Slot("t2", 0, 2)),), agent="beta"),
    ),
    forbid=(Forbid("t4", "allow"),),
    from_definitions=True,
    agents=("alpha",),
)
