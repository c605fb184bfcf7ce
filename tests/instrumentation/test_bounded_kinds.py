"""Values of every kind the JSON encoding knows (dataclasses, namedtuples, enums, sets, models, subclasses of dict,
list, str, int and float ...) are recorded at a cost independent of their size beyond the kept prefix, with the
text the whole encoding gives; a value that cannot be encoded gets a marker; nothing reaches the agent, and
nothing the tool received is changed or kept."""

from __future__ import annotations

import collections
import dataclasses
import datetime
import enum
import json
import time
import types
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import instrumentation as tw
from instrumentation._content import SETTINGS, to_json, to_json_prefix
from instrumentation._reprclip import repr_prefix
from tests.instrumentation.conftest import Recorded


@dataclasses.dataclass
class Box:
    rows: Any
    label: str = "box"


@dataclasses.dataclass
class Node:
    parent: Node | None = None


@attrs.define
class Record:
    """Recorded through its repr (attrs-generated), as any object the JSON encoding does not know."""

    rows: Any
    name: str = "r"
    hidden: int = attrs.field(default=0, repr=False)


class Pair(NamedTuple):
    left: Any
    right: Any


class Colour(enum.Enum):
    RED = "red"
    ROWS = (1, 2)


class Level(enum.IntEnum):
    LOW = 1


class Model:
    """Shaped like a pydantic v2 model: serialized through `model_dump(mode="json")`."""

    def __init__(self, rows: Any) -> None:
        self.rows = rows

    def model_dump(self, mode: str = "python") -> dict[str, Any]:
        return {"rows": self.rows, "mode": mode}

    def __repr__(self) -> str:  # in a deque (recorded as its repr) copied by dataclasses.asdict: not its address
        return f"Model({self.rows!r})"


class Rows(list[Any]):
    pass


class Name(str):
    pass


class Count(int):
    pass


class Ratio(float):
    pass


@tw.tool
def echo(data: Any) -> Any:
    return data


def _seconds(call: Callable[[], Any]) -> float:
    """The CPU time this thread spends in `call`. Not wall-clock time: on a loaded machine (another test worker on
    each core) a few-millisecond call is often descheduled for tens of ms, and its wall time says nothing of its cost
    (measured under load: a bounded prefix 1.5-25 ms wall for 1.7-2.4 ms of CPU). Everything timed here runs in the
    calling thread, so its CPU time is the whole cost."""
    start = time.thread_time()
    call()
    return time.thread_time() - start


BIG = 1_000_000
MAKERS: dict[str, Callable[[int], Any]] = {
    "dataclass": lambda n: Box(list(range(n))),
    "dataclasses in a list": lambda n: [Box(i) for i in range(n // 10)],
    "namedtuple": lambda n: Pair(list(range(n)), "end"),
    "model_dump": lambda n: Model([Box(i) for i in range(n // 10)]),
    "enum of a list": lambda n: [Colour.ROWS] * n,
    "tuple": lambda n: tuple(range(n)),
    "set": lambda n: set(range(n)),
    "frozenset": lambda n: frozenset(range(n)),
    "OrderedDict": lambda n: collections.OrderedDict((str(i), i) for i in range(n // 4)),
    "defaultdict": lambda n: collections.defaultdict(int, {str(i): i for i in range(n // 4)}),
    "Counter": lambda n: collections.Counter({str(i): i for i in range(n // 4)}),
    "list subclass": lambda n: Rows(range(n)),
    "str subclass": lambda n: Name("é" * (n * 4)),
    "dict with a dataclass": lambda n: {"query": "q", "box": Box(list(range(n)))},
    "deep nesting": lambda n: {"a": [[[[Pair(i, Level.LOW)]]] for i in range(n // 4)]},
    "huge key": lambda n: {"k" * (n * 4): 1},
    "deque": lambda n: collections.deque(range(n)),
    "mappingproxy": lambda n: types.MappingProxyType({str(i): [i] for i in range(n // 4)}),
    "attrs": lambda n: Record([(i, str(i)) for i in range(n // 4)]),
    "attrs in a deque": lambda n: collections.deque([Record({"i": i}) for i in range(n // 10)], maxlen=n),
}


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_a_huge_value_of_any_kind_costs_what_a_small_one_does(kind: str) -> None:
    """A dataclass holding a million rows added 0.77 s to a call, a deque or namedtuple 50-80 ms (serialized whole,
    through dataclasses.asdict for a dataclass); now its cost does not grow with its size."""
    limit = SETTINGS.current.max_length
    small, big = MAKERS[kind](BIG // 100), MAKERS[kind](BIG)
    took_small = min(_seconds(lambda: to_json_prefix(small, limit)) for _ in range(3))
    took_big = min(_seconds(lambda: to_json_prefix(big, limit)) for _ in range(3))
    whole = _seconds(lambda: to_json(big))
    # In CPU time the big value's prefix costs 0.9-1.1x the small one's, on a loaded machine too; encoded whole (the
    # bug) its cost grows with the value, 100 times the small one.
    assert took_big < max(3 * took_small, 0.002), (took_small, took_big, whole)
    prefix = to_json_prefix(big, limit)
    assert len(prefix) > limit and prefix[:limit] == to_json(big)[:limit]


def test_a_tool_taking_and_returning_a_huge_dataclass_records_its_prefix(capture: Recorded) -> None:
    value = Box(list(range(BIG)))
    assert echo(value) is value
    limit = SETTINGS.current.max_length
    attrs = dict(capture.spans()[-1].attributes or {})
    assert attrs["gen_ai.tool.call.result"] == to_json(value)[:limit]
    assert attrs["gen_ai.tool.call.arguments"] == ('{"data":' + to_json(value))[:limit]
    assert attrs["toolwatch.truncated"] == ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result")


leaves = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
    | st.binary(max_size=12) | st.sampled_from([Colour.RED, Colour.ROWS, Level.LOW, datetime.date(2026, 1, 2)])
    | st.integers().map(Count) | st.floats(allow_nan=False).map(Ratio) | st.text(max_size=12).map(Name)
)
keys = st.text(max_size=6) | st.integers() | st.text(max_size=4).map(Name) | st.booleans() | st.none()


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return (
        st.lists(inner, max_size=8) | st.lists(inner, max_size=5).map(tuple) | st.lists(inner, max_size=5).map(Rows)
        | st.dictionaries(keys, inner, max_size=6)
        | st.dictionaries(st.text(max_size=5), inner, max_size=5).map(collections.OrderedDict)
        # Small ints only: dataclasses.asdict deep-copies a set, and a copy of a set whose items collide in its
        # table may iterate in another order (the old path's text then differs in order only).
        | st.frozensets(st.integers(0, 7), max_size=6) | st.sets(st.integers(0, 7), max_size=6)
        | st.builds(Box, inner, st.text(max_size=5)) | st.builds(Pair, inner, inner) | st.builds(Model, inner)
        | st.lists(inner, max_size=5).map(collections.deque) | st.builds(Record, inner, st.text(max_size=5))
    )


values = st.recursive(leaves, _containers, max_leaves=50)


@settings(max_examples=500, deadline=None)
@given(value=values, data=st.data())
def test_a_prefix_is_the_beginning_of_the_whole_json_for_every_kind(value: Any, data: st.DataObject) -> None:
    whole = to_json(value)
    limit = data.draw(st.integers(min_value=1, max_value=len(whole) + 1), label="limit")
    prefix = to_json_prefix(value, limit)
    if len(whole) <= limit:
        assert prefix == whole
    else:
        assert len(prefix) > limit and prefix[:limit] == whole[:limit]


quoted = st.text(alphabet="ab'\"\\\né", max_size=12)
repr_leaves = st.none() | st.integers() | quoted | quoted.map(lambda t: t.encode()) | st.floats(allow_nan=False)
repr_values = st.recursive(repr_leaves, lambda inner: (
    st.lists(inner, max_size=6) | st.lists(inner, max_size=3).map(tuple)
    | st.dictionaries(quoted | st.integers(), inner, max_size=5)
    | st.lists(inner, max_size=5).map(collections.deque)
    | st.builds(collections.deque, st.lists(inner, max_size=5), st.integers(5, 9))
    | st.builds(Record, inner, quoted) | st.dictionaries(quoted, inner, max_size=4).map(types.MappingProxyType)
), max_leaves=40)


@settings(max_examples=500, deadline=None)
@given(value=repr_values, data=st.data())
def test_a_repr_prefix_is_the_beginning_of_the_whole_repr(value: Any, data: st.DataObject) -> None:
    whole = repr(value)
    room = data.draw(st.integers(min_value=0, max_value=len(whole) + 1), label="room")
    prefix = repr_prefix(value, room)
    if len(whole) <= room:
        assert prefix == whole
    else:
        assert len(prefix) > room and prefix[:room + 1] == whole[:room + 1]


def test_a_circular_value_recorded_through_its_repr_shows_as_its_repr_does() -> None:
    items: list[Any] = [1]
    record = Record(items)
    items.append(record)
    assert to_json_prefix(collections.deque([record]), 1000) == to_json(collections.deque([record]))
    assert "Record(rows=[1, ...]" in to_json(collections.deque([record]))


def _chain(depth: int) -> Node:
    node = Node()
    for _ in range(depth):
        node = Node(node)
    return node


def _deep_list_then_text(depth: int) -> list[Any]:
    inner: list[Any] = []
    for _ in range(depth):
        inner = [inner]
    return [inner, "z" * 20_000]


@pytest.mark.parametrize("make", [_chain, _deep_list_then_text])
@pytest.mark.parametrize("depth", [50, 600, 900])
def test_a_deep_value_is_recorded_as_the_whole_encoding_begins(make: Callable[[int], Any], depth: int) -> None:
    """The bounded copy is made by a Python walk, which runs out of stack before the C encoder does: a dataclass
    chain 300 deep, a list 600 deep, got a marker instead of their text. They are encoded as before."""
    value = make(depth)
    whole = to_json(value)
    assert "unserializable" not in whole
    assert to_json_prefix(value, 16384)[:16384] == whole[:16384]


class Broken:
    @property
    def __dict__(self) -> dict[str, Any]:  # type: ignore[override]
        raise RuntimeError("no dict")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


@dataclasses.dataclass
class Raising:
    rows: list[int]

    def __getattribute__(self, name: str) -> Any:
        if name == "rows":
            raise RuntimeError("property failed")
        return object.__getattribute__(self, name)


class FailingModel:
    def model_dump(self, mode: str = "python") -> dict[str, Any]:
        raise ValueError("cannot dump")


def _cyclic() -> Node:
    node = Node()
    node.parent = Node(node)
    return node


@pytest.mark.parametrize("make", [Broken, lambda: Raising([1]), FailingModel, _cyclic,
                                  lambda: {"k": [Box(_cyclic())] * 3}, lambda: {Box(1).label: {(1, 2): 3}}])
def test_a_value_that_cannot_be_encoded_gets_a_marker_and_the_call_its_result(capture: Recorded,
                                                                               make: Callable[[], Any]) -> None:
    value = make()
    assert echo(value) is value
    attrs = dict(capture.spans()[-1].attributes or {})
    result = json.loads(str(attrs["gen_ai.tool.call.result"]))
    assert result == to_json_prefix(value, 100).strip('"') and result.startswith("<unserializable ")
    assert result == json.loads(to_json(value))


def test_a_model_past_the_kept_prefix_is_not_dumped() -> None:
    dumped: list[int] = []

    class Counted:
        def __init__(self, index: int) -> None:
            self.index = index

        def model_dump(self, mode: str = "python") -> dict[str, Any]:
            dumped.append(self.index)
            return {"index": self.index}

    to_json_prefix([Counted(i) for i in range(100_000)], 1000)
    assert 0 < len(dumped) < 200


def test_a_redaction_hook_cannot_change_the_arguments_the_tool_gets(recorded: Recorded) -> None:
    """The hook got the tool's own nested objects: one that redacted in place changed what the tool received (the
    tool saw the redacted password). It now gets a detached copy of plain data."""
    received: list[Any] = []

    @tw.tool
    def login(payload: dict[str, Any], box: Box, rows: list[Any]) -> str:
        received.append((json.dumps(payload), box.label, list(rows)))
        return "ok"

    def hook(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        arguments["payload"]["password"] = "[HIDDEN]"
        box = arguments["box"]
        if isinstance(box, dict):  # a copy, as plain data
            box["label"] = "changed"
        else:  # the tool's own object, as the hook got it before
            box.label = "changed"
        arguments["rows"].clear()
        return arguments

    tw.configure_content(capture_content=True, redact_hook=hook)
    payload = {"user": "ann", "password": "hunter2"}
    box = Box([1], "original")
    rows = [1, 2]
    assert login(payload, box, rows) == "ok"
    assert received == [('{"user": "ann", "password": "hunter2"}', "original", [1, 2])]
    assert payload == {"user": "ann", "password": "hunter2"} and box == Box([1], "original") and rows == [1, 2]
    attrs = dict(recorded.named("execute_tool login").attributes or {})
    assert json.loads(str(attrs["gen_ai.tool.call.arguments"])) == {"payload": {"user": "ann", "password": "[HIDDEN]"},
                             "box": {"rows": [1], "label": "changed"}, "rows": []}


def test_a_hook_dropping_a_huge_argument_still_records_the_others_whole(recorded: Recorded) -> None:
    @tw.tool
    def upload(blob: str, name: str, tags: list[str]) -> None:
        return None

    tw.configure_content(capture_content=True, redact_hook=lambda n, a: {k: v for k, v in a.items() if k != "blob"})
    upload("x" * 5_000_000, "report.pdf", ["a", "b"])
    attrs = dict(recorded.named("execute_tool upload").attributes or {})
    assert attrs["gen_ai.tool.call.arguments"] == '{"name":"report.pdf","tags":["a","b"]}'


def test_key_redaction_reaches_into_dataclasses_and_huge_arguments_stay_bounded(recorded: Recorded) -> None:
    @tw.tool
    def store(secret_box: Box, rows: list[Any]) -> None:
        return None

    tw.configure_content(capture_content=True, redact_keys=["label"])
    rows = [{"label": i} for i in range(BIG)]
    took = _seconds(lambda: store(Box("r", "hunter2"), rows))
    text = str((recorded.named("execute_tool store").attributes or {})["gen_ai.tool.call.arguments"])
    assert text.startswith('{"secret_box":{"rows":"r","label":"[REDACTED]"},"rows":[{"label":"[REDACTED]"},')
    assert "hunter2" not in text and took < 0.05


def test_the_recorded_value_is_not_kept(capture: Recorded) -> None:
    value = Box([Record([1])] * 100_000)
    alive = weakref.ref(value)
    assert echo(value) is value
    del value
    assert alive() is None and capture.spans()


@pytest.mark.parametrize("redact", [False, True])
def test_an_unknown_tool_with_huge_arguments_is_recorded_at_a_bounded_cost(capture: Recorded, redact: bool) -> None:
    """The arguments of a call that could not run (an unknown tool) were serialized whole before being cut."""
    if redact:
        tw.configure_content(redact_keys=["token"])
    executor = tw.ToolExecutor([echo], on_error="result")
    arguments = {"rows": [{"token": "t", "n": i} for i in range(BIG)]}
    took = min(_seconds(lambda: executor.execute("nope", arguments)) for _ in range(2))
    text = str(dict(capture.spans()[-1].attributes or {})["gen_ai.tool.call.arguments"])
    expected = to_json({"rows": [{"token": "[REDACTED]" if redact else "t", "n": i} for i in range(1000)]})
    assert text == expected[:SETTINGS.current.max_length] and took < 0.05, took


def test_a_kwargs_tool_called_with_a_huge_argument_name_records_its_prefix_at_a_bounded_cost(
    recorded: Recorded,
) -> None:
    """A `**kwargs` tool's argument names are the caller's: they are counted, as a dict's keys are. (Those of a tool
    without `**kwargs` are its parameters' names, left uncounted on the hot path.)"""

    @tw.tool
    def search(**filters: Any) -> int:
        return len(filters)

    tw.configure_content(capture_content=True)
    limit = SETTINGS.current.max_length
    for n in (BIG // 100, BIG):  # warm up, then the huge name
        took = _seconds(lambda n=n: search(**{"k" * (n * 4): 1}))  # type: ignore[misc]
    text = str((recorded.spans()[-1].attributes or {})["gen_ai.tool.call.arguments"])
    assert text == to_json({"k" * (BIG * 4): 1})[:limit] and took < 0.02, took


def test_a_tool_without_kwargs_records_its_arguments_whole_when_they_fit(recorded: Recorded) -> None:
    @tw.tool
    def lookup(city: str, days: int, tags: list[str]) -> None:
        return None

    tw.configure_content(capture_content=True)
    lookup("Paris", days=3, tags=["a"])
    text = str((recorded.named("execute_tool lookup").attributes or {})["gen_ai.tool.call.arguments"])
    assert text == '{"city":"Paris","days":3,"tags":["a"]}'
