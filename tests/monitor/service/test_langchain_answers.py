"""A LangChain or LangGraph run's answer, and its input, as its producers record them (issue 4).

LangChain and LangGraph through OpenInference have no AGENT span: the run's turn is its root CHAIN span, whose
`output.value` is the graph's state, LangChain's serialized messages: `{"messages": [{"type": "ai", "data": {...}},
...]}` (langchain-core 1.x's `messages_to_dict` form, as openinference-instrumentation-langchain 0.1.80 writes it);
the dumps of other producers and versions are `{"lc": 1, "type": "constructor", "id": [..., "AIMessage"], "kwargs":
{...}}` (OpenLLMetry's `traceloop.entity.output`) and the message's own fields (`{"type": "ai", "content": ...}`).
A sub-agent's run (its node's AGENT span) is given such messages as its input. The answer is the text of the last AI
message that asks for no tool call (content a string or a list of text parts), after the last human message; an AI
message that asks for tool calls (with or without text beside them: langgraph-supervisor's handoff back, "Transferring
back to supervisor") is not it. OpenLLMetry records a LangGraph run's answer on the `{graph}.workflow` span under the
graph's `invoke_agent` span, which records none: the workflow span gives it to the turn, as it gives its input.

The captures (tests/monitor/service/data) of every producer of LangGraph runs, replayed through the real normalizer and
turn assembler (C and Python): each turn's agent, input and answer; a rule's response check judged from the answer,
end to end (`toolwatch replay`'s figures: response format compliance = response_ok turns / turns with response
checks); and the message forms on spans of the real OTel SDK.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.cli.replay_cmd import replay
from monitor.judge import Judge, Tally
from monitor.records import Turn
from monitor.rules import load_rules
from tests.monitor.service.captures import DATA, captured_turns
from tests.monitor.service.test_normalize_foreign import PATHS, Convert, _one, _run
from tests.monitor.service.test_requested_calls import IMPLS

Q = "What is the weather in Paris?"
A = "It is sunny in Paris."
OSLO = "weather in Oslo and 2+3?"
_JSON = "application/json"

# Each capture of a LangGraph run: its turns by start time, (agent, input, answer).
ANSWERS: dict[str, list[tuple[str, str, str | None]]] = {
    "langgraph_react_openinference": [("LangGraph", "weather in Paris?", A)],
    "langgraph_request_openinference": [("LangGraph", Q, A), ("LangGraph", Q, A), ("weather_agent", Q, A),
                                        ("LangGraph", Q, A)],
    # the supervisor's answer; each sub-agent's its last message before its handoff back (an AI message asking for
    # `transfer_back_to_supervisor`, with text); a sub-agent's input its latest human message among those it is given
    "langgraph_supervisor_openinference": [("LangGraph", OSLO, "Rainy in Oslo, and 2+3=5."),
                                           ("weather_agent", OSLO, "Rainy in Oslo."), ("math_agent", OSLO, "5")],
    "langgraph_subgraphs_openinference": [("LangGraph", OSLO, "5"), ("weather_agent", OSLO, "Rainy in Oslo."),
                                          ("math_agent", OSLO, "5")],
    "double_langgraph_openinference": [("weather-bot", Q, A)],
    "langgraphjs_react_openinference": [("weather_agent", Q, A)],
    "langgraphjs_react_openinference_raises": [("weather_agent", "What is the weather in Atlantis?",
                                                "I could not find the weather in Atlantis.")],
    "langgraphjs_react_openinference_toolerror": [("weather_agent", "What is the weather in Atlantis?",
                                                   "I could not find the weather in Atlantis.")],
    "openllmetry_langgraph_react": [("LangGraph", Q, A)],
    "openllmetry_langgraph_named": [("weather_agent", Q, A)],
    "double_langgraph_openllmetry": [("weather-bot", Q, A), ("LangGraph", Q, A)],
    "openlit_langgraph_tool": [("weather_agent", Q, A)],
    "openlit_langgraph_request": [("weather_agent", Q, A), ("weather_agent", Q, A)],
}  # fmt: skip


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_each_langgraph_runs_turn_has_its_input_and_answer(impl: str, name: str) -> None:
    turns = captured_turns(name, impl)
    assert [(t.agent, t.input_text, t.output_text) for t in turns] == ANSWERS[name]


def _rules(tmp_path: Path, name: str, check: dict[str, str]) -> Path:
    """A rule file whose one expectation (every turn) holds `check` as its response check."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(json.dumps({
        "version": 1,
        "catalog": {"tools": [{"name": "get_weather"}, {"name": "get_forecast"}, {"name": "add"}]},
        "expect": [{"id": "answered", "call": [{"tool": "get_weather", "min": 0, "max": 9},
                                               {"tool": "add", "min": 0, "max": 9}],
                    "respond": [check]}],
    }), encoding="utf-8")  # fmt: skip
    return path


def _exactly(name: str) -> dict[str, str]:
    """A response check that only the answers of the capture's turns pass, whole (never the state's JSON around them,
    nor the question)."""
    answers = sorted({a for _, _, a in ANSWERS[name] if a is not None})
    return {"regex": "^(" + "|".join(a.replace(".", r"\.").replace("+", r"\+") for a in answers) + ")$"}


# In every question (so in every turn's state) but in no answer: a check the state's JSON would pass.
THE_QUESTION = {"contains": "?"}


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_a_response_check_is_judged_from_the_answer(tmp_path: Path, impl: str, name: str) -> None:
    turns = captured_turns(name, impl)
    for check, want in ((_exactly(name), 1.0), (THE_QUESTION, 0.0)):
        judge = Judge(load_rules([_rules(tmp_path, name, check)]))
        tally = Tally()
        for t in turns:
            tally.add(judge.judge(t))
        assert (tally.response_checked_turns, tally.ratios()["response_compliance"]) == (len(turns), want)


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_replay_reports_the_response_compliance_of_the_answers(tmp_path: Path, name: str) -> None:
    """`toolwatch replay` of the capture: response format compliance, as METRICS.md defines it, over its turns."""
    for check, want in ((_exactly(name), 1.0), (THE_QUESTION, 0.0)):
        out = tmp_path / "report.json"
        res = CliRunner().invoke(replay, [str(DATA / f"{name}.jsonl"), "--rules", str(_rules(tmp_path, name, check)),
                                          "--no-progress", "-q", "--json", str(out)])  # fmt: skip
        assert res.exit_code == 0, res.output
        report = json.loads(out.read_text())
        assert (report["counts"]["turns"], report["figures"]["response_compliance"]) == (len(ANSWERS[name]), want)


# ---- the message forms, on spans of the real OTel SDK -------------------------------------------------------------


def _lc(kind: str, content: Any, **fields: Any) -> dict[str, Any]:
    """A message as langchain-core's `messages_to_dict` writes it (OpenInference's LangGraph states)."""
    return {"type": kind, "data": {"content": content, "additional_kwargs": {}, "response_metadata": {}, "type": kind,
                                   "name": None, "id": None, **fields}}  # fmt: skip


_CLASSES = {"human": "HumanMessage", "ai": "AIMessage", "tool": "ToolMessage", "system": "SystemMessage"}


def _dumpd(kind: str, content: Any, *, typed: bool = True, **fields: Any) -> dict[str, Any]:
    """As langchain-core's `dumpd` writes it (OpenLLMetry's), its type in `kwargs` or (`typed` False) only the class
    named last in `id`."""
    kwargs = {"content": content, **({"type": kind} if typed else {}), **fields}
    return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", _CLASSES[kind]], "kwargs": kwargs}


def _fields(kind: str, content: Any, **fields: Any) -> dict[str, Any]:
    """A message's own fields (pydantic's `model_dump`)."""
    return {"content": content, "type": kind, **fields}


CALL = [{"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1", "type": "tool_call"}]
FORMS = [_lc, _dumpd, _fields]


def _chain(output: Any = None, inputs: Any = None) -> dict[str, Any]:
    """The attributes of a LangGraph run's root CHAIN span with this state as its output and input."""
    attrs: dict[str, Any] = {"openinference.span.kind": "CHAIN"}
    if inputs is not None:
        attrs |= {"input.value": json.dumps(inputs), "input.mime_type": _JSON}
    if output is not None:
        attrs |= {"output.value": output if isinstance(output, str) else json.dumps(output),
                  "output.mime_type": _JSON}  # fmt: skip
    return attrs


def _turn_of(convert: Convert, attrs: dict[str, Any]) -> tuple[Turn, list[str]]:
    out, problems, rejected = _run(convert, _one(attrs))
    assert rejected == {}
    [turn] = out
    assert isinstance(turn, Turn)
    return turn, problems


@pytest.mark.parametrize("convert", PATHS)
@pytest.mark.parametrize("form", FORMS)
def test_the_answer_is_the_last_ai_message_asking_for_no_tool(convert: Convert, form: Any) -> None:
    messages = [form("human", Q), form("ai", "", tool_calls=CALL), form("tool", "sunny", tool_call_id="call_1"),
                form("ai", A, tool_calls=[])]  # fmt: skip
    turn, problems = _turn_of(convert, _chain({"messages": messages}, {"messages": messages[:1]}))
    assert (turn.input_text, turn.output_text, problems) == (Q, A, [])


@pytest.mark.parametrize("convert", PATHS)
@pytest.mark.parametrize("form", FORMS)
def test_text_parts_are_the_messages_text(convert: Convert, form: Any) -> None:
    """A content list: its strings and `text` blocks joined as LangChain's `.text` joins them; other blocks (a tool
    use, an image) are no text."""
    question = [{"type": "text", "text": "What is "}, "the weather ", {"type": "image_url", "image_url": {"url": "u"}},
                {"type": "text", "text": "in Paris?"}]  # fmt: skip
    answer = [{"type": "text", "text": "It is sunny"}, {"type": "text", "text": " in Paris."}]
    use = [{"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}}]
    messages = [form("human", question), form("ai", use, tool_calls=CALL), form("ai", answer)]
    turn, problems = _turn_of(convert, _chain({"messages": messages}, {"messages": messages[:1]}))
    assert (turn.input_text, turn.output_text, problems) == (Q, A, [])


@pytest.mark.parametrize("convert", PATHS)
def test_a_dump_naming_its_class_only_and_chunks_are_read(convert: Convert) -> None:
    """`dumpd` of an older langchain-core (no `type` among the kwargs: the class named last in `id`); a streamed
    run's message chunks (`AIMessageChunk`)."""
    chunk = {"content": A, "type": "AIMessageChunk", "tool_calls": []}
    for answer in (_dumpd("ai", A, typed=False), chunk, _lc("AIMessageChunk", A)):
        messages = [_dumpd("human", Q, typed=False), answer]
        turn, problems = _turn_of(convert, _chain({"messages": messages}, {"messages": messages[:1]}))
        assert (turn.input_text, turn.output_text, problems) == (Q, A, [])


@pytest.mark.parametrize("convert", PATHS)
def test_an_ai_message_asking_for_tools_is_no_answer_even_with_text(convert: Convert) -> None:
    """Text beside tool calls is what the model said before calling them (langgraph-supervisor's handoff back:
    "Transferring back to supervisor"); OpenAI's legacy `additional_kwargs.tool_calls`, and a call the model asked
    for that did not parse (`invalid_tool_calls`), are requests for tools too."""
    legacy = {"tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    bad = [{"name": "f", "args": "{", "id": "c", "error": "bad JSON", "type": "invalid_tool_call"}]
    for asking in (_lc("ai", "Transferring back to supervisor", tool_calls=CALL),
                   _lc("ai", "Let me look.", additional_kwargs=legacy), _lc("ai", "Hm.", invalid_tool_calls=bad)):
        messages = [_lc("human", Q), _lc("ai", "Rainy in Oslo."), asking, _lc("tool", "ok", tool_call_id="c")]
        turn, problems = _turn_of(convert, _chain({"messages": messages}))
        assert (turn.output_text, problems) == ("Rainy in Oslo.", [])


@pytest.mark.parametrize("convert", PATHS)
def test_no_answer_after_the_question_is_no_answer(convert: Convert) -> None:
    """A run that ended on a request for tools (a tool that returns directly), or gave no AI message after the
    latest human one, has no answer: an earlier turn's answer in the state's history is not this one's, and the
    state's JSON is none either (None: the response checks are not judged)."""
    history = [_lc("human", "weather in Oslo?"), _lc("ai", "Rainy in Oslo.")]
    for tail in ([_lc("human", Q), _lc("ai", "", tool_calls=CALL), _lc("tool", "sunny")], [_lc("human", Q)]):
        turn, problems = _turn_of(convert, _chain({"messages": history + tail}))
        assert (turn.output_text, problems) == (None, [])


@pytest.mark.parametrize("convert", PATHS)
def test_an_empty_final_answer_is_an_empty_answer(convert: Convert) -> None:
    turn, problems = _turn_of(convert, _chain({"messages": [_lc("human", Q), _lc("ai", "")]}))
    assert (turn.output_text, problems) == ("", [])


@pytest.mark.parametrize("convert", PATHS)
def test_one_message_as_the_output_is_the_answer(convert: Convert) -> None:
    """A LangChain chain whose last step is the model (`prompt | model`): its output is the AI message itself."""
    for form in FORMS:
        turn, problems = _turn_of(convert, _chain(form("ai", A), {"question": Q}))
        assert (turn.input_text, turn.output_text, problems) == (Q, A, [])


@pytest.mark.parametrize("convert", PATHS)
def test_openai_style_messages_follow_the_same_rule(convert: Convert) -> None:
    """A run given, or returning, messages as role dicts: the answer the last assistant message asking for no tool."""
    messages = [{"role": "user", "content": Q}, {"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]},
                {"role": "tool", "content": "sunny"}, {"role": "assistant", "content": [{"type": "text", "text": A}]},
                {"role": "assistant", "content": "Checking.", "tool_calls": [{"id": "d"}]}]  # fmt: skip
    turn, problems = _turn_of(convert, _chain({"messages": messages}, {"messages": messages[:1]}))
    assert (turn.input_text, turn.output_text, problems) == (Q, A, [])


@pytest.mark.parametrize("convert", PATHS)
def test_a_langgraph_input_of_serialized_messages_is_its_latest_human_message(convert: Convert) -> None:
    """A run (a sub-agent's, or a graph invoked with message objects) given LangChain's serialized messages: its input
    is the text of the latest human messages, whatever came after them (the supervisor's handoff to it)."""
    for form in FORMS:
        given = [form("human", "earlier"), form("ai", "done"), form("human", Q),
                 form("ai", "", tool_calls=CALL), form("tool", "Successfully transferred", tool_call_id="call_1")]
        turn, problems = _turn_of(convert, _chain(None, {"messages": given}))
        assert (turn.input_text, problems) == (Q, [])


# Wrong-typed or malformed parts of a state: ignored and counted under the value's key, never raised on.
MALFORMED = [
    ([_lc("human", Q), _lc("ai", 42)], None),  # the answer's content neither text nor parts: no answer
    ([_lc("human", Q), _lc("ai", {"text": A})], None),
    ([_lc("human", Q), _lc("ai", A), 7], A),  # a message that is no message: passed over
    ([_lc("human", Q), {"data": {"content": "x"}}, _lc("ai", A)], A),  # no type
    ([_lc("human", Q), {"type": "ai", "data": "x"}, _lc("ai", A)], A),  # no fields
    ([_lc("human", Q), _lc("ai", [7, None, {"type": "text", "text": A}])], A),  # parts that are no parts: passed over
]


@pytest.mark.parametrize("convert", PATHS)
@pytest.mark.parametrize(("messages", "want"), MALFORMED)
def test_malformed_messages_are_ignored_and_counted(convert: Convert, messages: list[Any], want: str | None) -> None:
    turn, problems = _turn_of(convert, _chain({"messages": messages}))
    assert (turn.output_text, problems) == (want, ["output.value"])
    turn, problems = _turn_of(convert, _chain(None, {"messages": [*messages[1:], messages[0]]}))
    assert (turn.input_text, problems) == (Q, ["input.value"])


@pytest.mark.parametrize("convert", PATHS)
def test_an_unknown_message_type_is_passed_over_uncounted(convert: Convert) -> None:
    """LangGraph's RemoveMessage (`remove`), a type of a later version: no message of the conversation, no error."""
    messages = [_lc("human", Q), _lc("ai", A), _lc("remove", ""), _lc("later", "x")]
    turn, problems = _turn_of(convert, _chain({"messages": messages}))
    assert (turn.output_text, problems) == (A, [])


_JSONS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5)
    | st.sampled_from(["human", "ai", "tool", "type", "data", "kwargs", "content", "text", "role", "tool_calls"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["type", "data", "kwargs", "content", "text", "role", "tool_calls", "id", "lc", "messages",
                         "additional_kwargs", "invalid_tool_calls", "function_call", "parts"]), inner, max_size=5),
    max_leaves=20,
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(output=_JSONS, inputs=_JSONS)
def test_any_state_is_read_without_raising(output: Any, inputs: Any) -> None:
    """Whatever JSON a run's state holds: a turn, its input and answer text or nothing, the same on both paths."""
    attrs = _chain({"messages": output}, {"messages": inputs})
    got = [_turn_of(convert.values[0], attrs) for convert in PATHS]
    for turn, _ in got:
        assert isinstance(turn.input_text, str) and (turn.output_text is None or isinstance(turn.output_text, str))
    assert len({(t.input_text, t.output_text, tuple(p)) for t, p in got}) == 1
