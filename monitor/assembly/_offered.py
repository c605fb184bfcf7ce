"""The tools offered on a turn's model request spans joined to the turn's own offered tools, and the input they were
given, at release.

A turn's calls, as assembled, may hold OfferedTools records (monitor.normalize._offered): the tools a chat span under
the turn offered the model, held as calls so that they go to their nearest enclosing turn as requested calls do.
At release they leave the calls (they are no call) and their definitions join the turn's `tool_definitions`: the turn
span's own first, as it gave them, then those of the chat spans in arrival order, each only when it names a tool not
offered before (the first definition of a name wins), until the turn holds MAX_OFFERED_PER_TURN (the turn span's own
are never cut). A turnless group's definitions are those of the chat spans of its calls' trace that no released turn
encloses.

The input spans under the turn were given (InputMark: the model requests of openai-agents through OpenInference and
of google-adk, which record none on their turn spans; a Traceloop workflow span under the turn, where OpenLLMetry's
LangChain instrumentation records a LangGraph run's input and answer) leaves the calls too: when the turn's own input
text is empty, the earliest with text (by start time, then span id) gives it; when the turn has no answer, the latest
with one (by end time, then span id) gives that.

An agent repeats the same definitions on every chat span, and the normalizer shares one parsed value between them:
each distinct value is read once per turn, and a turn whose chat spans offer one value, and the turn span none, gets
that very value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from monitor.records import InputMark, OfferedTools, ToolCall, Turn, definition_name

Definitions = tuple[Mapping[str, Any], ...]

# The definitions a turn keeps, the turn span's own included (those are never cut): chat spans' tools past it are left
# out. An agent seldom offers more than a few dozen tools; this leaves room for aggregated tool servers.
MAX_OFFERED_PER_TURN = 1024


def take_offered(calls: list[ToolCall]) -> tuple[list[ToolCall], list[Definitions], str | None, str | None]:
    """`calls` without the OfferedTools and InputMark records (`calls` itself when there are none), the definitions
    of those offered in the order of `calls`, the text of the earliest InputMark with text and the answer of the
    latest one with an answer (each None without one)."""
    offered: list[Definitions] = []
    first: InputMark | None = None
    last: InputMark | None = None
    marks = False
    for c in calls:
        if isinstance(c, OfferedTools):
            offered.append(c.definitions)
        elif isinstance(c, InputMark):
            marks = True
            if c.arguments and (first is None or (c.start_ns, c.span_id) < (first.start_ns, first.span_id)):
                first = c
            if c.result is not None and (last is None or (c.end_ns, c.span_id) > (last.end_ns, last.span_id)):
                last = c
    if not offered and not marks:
        return calls, offered, None, None
    kept = [c for c in calls if not isinstance(c, OfferedTools | InputMark)]
    return kept, offered, first.arguments if first is not None else None, last.result if last is not None else None


def fill_in(turn: Turn, given: str | None, answer: str | None) -> None:
    """A turn given the input and answer of its InputMarks (`take_offered`) where its own span recorded none."""
    if given and not turn.input_text:
        turn.input_text = given
    if answer is not None and turn.output_text is None:
        turn.output_text = answer


# The last value a turn offering nothing of its own was given, and what it gave: the same agent's next turn is given
# the same value (one entry: it holds one value alive at most).
_last: tuple[Definitions, Definitions | None] = ((), None)


def joined(own: Definitions | None, offered: Sequence[Definitions]) -> Definitions | None:
    """The turn's definitions: `own` (the turn span's), then the tools of `offered` not offered before (see the module
    docstring). `own` itself when `offered` adds nothing."""
    global _last
    first = offered[0] if offered else None
    if own is None and first is not None and all(d is first for d in offered):
        last = _last  # one read: assemblers of other threads may set it meanwhile
        if last[0] is first:
            return last[1]
        got = _joined(own, offered)
        _last = (first, got)
        return got
    return _joined(own, offered)


def _joined(own: Definitions | None, offered: Sequence[Definitions]) -> Definitions | None:
    seen: set[str] = {n for d in own or () if (n := definition_name(d)) is not None}
    room = MAX_OFFERED_PER_TURN - len(own or ())
    added: list[Mapping[str, Any]] = []
    read: list[Definitions] = []  # the distinct values read
    read_ids: set[int] = set()  # theirs (all alive meanwhile): a turn of many chat spans is not read in square time
    for defs in offered:
        if room <= 0:
            break
        if id(defs) in read_ids:
            continue
        read.append(defs)
        read_ids.add(id(defs))
        for d in defs:
            name = definition_name(d)
            if name is None or name in seen:
                continue
            seen.add(name)
            added.append(d)
            room -= 1
            if room <= 0:
                break
    if not added:
        return own
    if not own and len(added) == len(read[0]) and all(a is d for a, d in zip(added, read[0], strict=True)):
        return read[0]  # one value offered whole: shared, not copied
    return (*(own or ()), *added)
