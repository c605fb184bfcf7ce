"""Builders for judge tests: rule files written to a temp dir, real Turns and ToolCalls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from monitor.judge import Judge
from monitor.records import ToolCall, Turn
from monitor.rules import load_rules

REPO = Path(__file__).resolve().parents[3]
RULES = REPO / "rules"

# Tools a, b, c, d with a schema; rules covering every shape of expectation.
BASE_RULES = """
version: 1
catalog:
  tools:
    - name: a
      schema: {type: object, properties: {x: {type: integer}, s: {type: string}}, additionalProperties: false}
    - name: b
      schema: {type: object}
    - name: c
    - name: d
expect:
  - id: A
    when: {prefix: "[A]"}
    call: [{tool: a}]
  - id: AB
    when: {prefix: "[AB]"}
    call: [{tool: a}, {tool: b}]
  - id: A2
    when: {prefix: "[A2]"}
    call: [{tool: a, exactly: 2}]
  - id: AMIN
    when: {prefix: "[AMIN]"}
    call: [{tool: a, min: 1}]
  - id: NONE
    when: {prefix: "[NONE]"}
    none: true
  - id: ANY
    when: {prefix: "[ANY]"}
    any_of:
      - call: [{tool: a}]
      - call: [{tool: b}, {tool: c}]
  - id: OPT
    when: {prefix: "[OPT]"}
    call: [{tool: a, min: 0, max: 2}]
  - id: ARG2
    when: {prefix: "[ARG2]"}
    call:
      - {tool: a, args: {x: 1}}
      - {tool: a, args: {x: 2}}
  - id: ARG1
    when: {prefix: "[ARG1]"}
    call: [{tool: a, args: {x: 1}}]
  - id: MINFIRST
    when: {prefix: "[MINFIRST]"}
    call:
      - {tool: a, exactly: 1, args: {x: 1}}
      - {tool: a, min: 0, max: 1, args: {x: 2}}
"""


def write(tmp_path: Path, text: str, name: str = "rules.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def judge_for(tmp_path: Path, text: str = BASE_RULES) -> Judge:
    return Judge(load_rules([write(tmp_path, text)]))


def call(name: str, args: dict[str, Any] | str | None = "{}", call_id: str = "") -> ToolCall:
    text = args if isinstance(args, str) or args is None else json.dumps(args)
    return ToolCall(name, call_id=call_id, arguments=text)


def turn(text: str, *calls: ToolCall | str, **kw: Any) -> Turn:
    built = tuple(call(c) if isinstance(c, str) else c for c in calls)
    return Turn(text, built, **kw)
