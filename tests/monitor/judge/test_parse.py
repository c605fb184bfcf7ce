"""The judge's argument parser behaves exactly like json.loads, except that NaN, Infinity and -Infinity (no JSON
values, which json.loads reads) are refused."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.judge._judge import _loads

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=10,
)
texts = st.one_of(
    json_values.map(json.dumps),
    st.tuples(st.sampled_from(["", " ", "\n"]), json_values.map(json.dumps), st.sampled_from(["", " ", "x", "}"])).map(
        "".join
    ),
    st.text(max_size=12),
)


def _refuse(name: str) -> Any:
    raise ValueError(name)


def _strict_json_loads(text: str) -> Any:
    return json.loads(text, parse_constant=_refuse)


def _outcome(fn: Any, text: str) -> tuple[str, Any]:
    try:
        return ("ok", fn(text))
    except ValueError as exc:
        return ("error", type(exc))


@settings(max_examples=300, deadline=None)
@given(texts)
def test_loads_matches_json_loads(text: str) -> None:
    assert _outcome(_loads, text) == _outcome(_strict_json_loads, text)
