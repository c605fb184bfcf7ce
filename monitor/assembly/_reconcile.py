"""The calls the model requested against the calls that ran, in one turn: each call counted once.

A turn's calls, as assembled, are the executed calls (execute_tool spans) and the requested calls (RequestedCall:
tool_call parts of its chat spans, monitor.normalize._requested). At release they are reconciled:

First, a call id a span above a tool's span holds (CallIdMark: LangGraph's ToolNode runs each call as a task of its own,
whose span holds the call; a tool that raised names no id of its own) is given to the one executed call of its name
without an id right under that span (a copy of it), unless an executed call holds that id already or the span's marks
of that name name several ids; the marks are then dropped (no call). So a call that raised is paired by id (rule 1),
not by name (rule 2), which pairs it with another call of its tool when one never ran or they started out of order.

0. An executed call whose span is the parent of an executed call of the same name, their arguments the same (or
   either not captured), is a wrapper's span around that call's own (OpenTelemetry's google-genai instrumentation
   wraps the function the SDK runs in an `execute_tool` span, the function a `@tool` with its own): one call, the
   inner one kept (the tool's own record: its id, its result as the tool gave it), given the arguments and result
   its wrappers captured when it captured none (content capture on for one of them only); the wrapper's call id is
   still that call's for rule 1. Each arguments text is parsed at most twice (as a wrapper's, as an inner call's).
1. A requested call with the call id of an executed call of the turn is that call: the executed one is kept (it
   holds what ran). A requested call with the id of an earlier requested call is a copy: dropped.
2. The executed calls whose id no requested call has (an id-less one, as a wrapper that is given no id records),
   nor that of a wrapper merged into it (rule 0: that one call is accounted for already), are then paired, in start
   order, each with the first requested call left of the same name, where one of the two has no id (two different
   ids are two different calls; an id toolwatch's `@tool` made up, `tw_` and 16 hex digits, is none: the model's id
   was not given to it, as when a framework runs the function, and so names no call the model asked for): the
   executed one is kept.
3. A handoff the turn holds (HandoffMark, monitor.normalize._flat) is no call: it drops the first requested call
   left of its name (the model asked for the handoff: a tool its framework makes, never run as a tool), then itself.
4. The requested calls left were never run: they are calls of the turn (marked by their type), in start order.

A turn (or turnless group) holding no requested call, no handoff, no call id mark and no call under another of its
name is left as it is.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from monitor._json import loads_bounded
from monitor.records import CallIdMark, HandoffMark, RequestedCall, ToolCall

MADE_UP_ID = "tw_"  # the prefix of the ids toolwatch's `@tool` makes up (instrumentation._context.new_call_id)


def reconcile(calls: list[ToolCall], gone: list[ToolCall] | None = None) -> list[ToolCall]:
    """`calls` (in start order) without the wrappers of executed calls, the requested calls an executed call or a
    handoff accounts for, and the handoffs; `calls` itself when none is dropped. Those dropped go to `gone` (when
    given), in the order of `calls`: a released turn remembers them as judged (a copy is a duplicate)."""
    requested: list[RequestedCall] = []
    executed: list[ToolCall] = []
    handoffs: list[HandoffMark] = []
    marks: list[CallIdMark] = []
    for c in calls:
        if isinstance(c, RequestedCall):
            requested.append(c)
        elif isinstance(c, HandoffMark):
            handoffs.append(c)
        elif isinstance(c, CallIdMark):
            marks.append(c)
        else:
            executed.append(c)
    if marks:  # a call id a task's span holds (see the module docstring)
        calls, executed = _given_ids(calls, executed, marks)
    wrapped = _wrappers(executed) if len(executed) > 1 else {}  # id() of a wrapper -> (it, the call it wraps)
    dropped = set(wrapped)  # id() of the calls dropped
    ran = executed  # their ids are the ids of calls that ran (rule 1), a wrapper's too
    filled: dict[int, ToolCall] = {}
    merged: dict[int, list[str]] = {}
    if dropped:
        executed = [c for c in executed if id(c) not in dropped]
        wrapper_of = {id(c): outer for outer, c in wrapped.values()}  # id() of a call -> the wrapper merged into it
        filled = _filled(executed, wrapper_of)
        merged = _merged_ids(executed, wrapper_of)
    elif not requested and not handoffs and not marks:
        return calls
    left = _by_id(requested, ran, dropped)
    _by_name(requested, executed, left, dropped, merged)
    for h in handoffs:  # rule 3
        dropped.add(id(h))
        same = left.get(h.name)
        if same:
            dropped.add(id(same.pop(0)))
    dropped.update(map(id, marks))
    if not dropped:
        return calls
    if gone is not None:
        gone.extend(c for c in calls if id(c) in dropped)
    return [filled.get(id(c), c) for c in calls if id(c) not in dropped]


def _given_ids(
    calls: list[ToolCall], executed: list[ToolCall], marks: list[CallIdMark]
) -> tuple[list[ToolCall], list[ToolCall]]:
    """`calls` and `executed` with a copy, given its id, in the place of each executed call without an id that is the
    one of its name right under a span whose marks of that name name one id, held by no executed call (see the module
    docstring); themselves when none is given one."""
    idless: dict[tuple[str, str], list[ToolCall]] = {}  # (parent span id, name) -> the executed calls without an id
    ran: set[str] = set()
    for c in executed:
        if c.call_id:
            ran.add(c.call_id)
        else:
            idless.setdefault((c.parent_span_id, c.name), []).append(c)
    if not idless:
        return calls, executed
    ids: dict[tuple[str, str], set[str]] = {}  # (the span a mark is under, name) -> the ids its marks name
    for m in marks:
        if m.call_id:
            ids.setdefault((m.parent_span_id, m.name), set()).add(m.call_id)
    given: dict[int, ToolCall] = {}
    for key, named in ids.items():
        under = idless.get(key)
        if under is None or len(under) != 1 or len(named) != 1:
            continue
        cid = next(iter(named))
        if cid in ran:
            continue
        c = copy.copy(under[0])  # released records are shared read-only: a new one
        c.call_id = cid
        given[id(under[0])] = c
    if not given:
        return calls, executed
    return [given.get(id(c), c) for c in calls], [given.get(id(c), c) for c in executed]


def _wrappers(executed: list[ToolCall]) -> dict[int, tuple[ToolCall, ToolCall]]:
    """Rule 0: the id() of the executed calls that are the parent span of an executed call of their name, with the
    same arguments (or either not captured), and not dropped themselves (never every call), each with the call that
    made it one: id(wrapper) -> (wrapper, call)."""
    by_span = {c.span_id: c for c in executed if c.span_id}
    pairs: list[tuple[ToolCall, ToolCall]] = []  # (call, the call of its name its span is under), in start order
    under: dict[int, tuple[ToolCall, list[ToolCall]]] = {}  # id(outer) -> (outer, the calls of its name under it)
    for c in executed:
        outer = by_span.get(c.parent_span_id) if c.parent_span_id else None
        if outer is not None and outer is not c and outer.name == c.name:
            pairs.append((c, outer))
            under.setdefault(id(outer), (outer, []))[1].append(c)
    if not pairs:
        return {}
    same: set[int] = set()  # id() of the calls with the arguments of the call they are under
    for outer, inner in under.values():
        _same_arguments(outer, inner, same)
    out: dict[int, tuple[ToolCall, ToolCall]] = {}
    for c, outer in pairs:  # in start order: of a chain, the innermost is kept
        if id(c) not in out and id(c) in same and id(outer) not in out:  # c not a wrapper itself (or a cycle of
            out[id(outer)] = (outer, c)  # parent ids): it makes no other call one
    return out


_NOT_JSON = object()


def _same_arguments(outer: ToolCall, inner: list[ToolCall], same: set[int]) -> None:
    """The id() of the calls of `inner` whose arguments are `outer`'s (or either not captured) into `same`: the
    outer's parsed once (a call of many under it), each inner one at most once."""
    a = outer.arguments
    parsed: Any = None
    for c in inner:
        b = c.arguments
        if a is None or b is None or a == b:
            same.add(id(c))
            continue
        if parsed is None:
            try:
                parsed = loads_bounded(a)
            except (ValueError, RecursionError):  # not JSON: two texts that differ
                parsed = _NOT_JSON
        if parsed is _NOT_JSON:
            continue
        try:
            if loads_bounded(b) == parsed:
                same.add(id(c))
        except (ValueError, RecursionError):
            pass


def _wrappers_of(call: ToolCall, wrapper_of: dict[int, ToolCall]) -> Iterator[ToolCall]:
    """The wrappers merged into `call` (rule 0), nearest first, up their chain (a cycle of parent ids ends it)."""
    outer = wrapper_of.get(id(call))
    for _ in range(len(wrapper_of)):
        if outer is None:
            return
        yield outer
        outer = wrapper_of.get(id(outer))


def _filled(kept: list[ToolCall], wrapper_of: dict[int, ToolCall]) -> dict[int, ToolCall]:
    """id() of each call kept that captured no arguments (or no result) while a wrapper merged into it did -> a copy
    of it with them, the nearest such wrapper's."""
    out: dict[int, ToolCall] = {}
    for k in kept:
        if k.arguments is not None and k.result is not None:
            continue
        arguments, result = k.arguments, k.result
        for outer in _wrappers_of(k, wrapper_of):
            if arguments is None:
                arguments = outer.arguments
            if result is None:
                result = outer.result
        if arguments is not k.arguments or result is not k.result:
            c = copy.copy(k)  # released records are shared read-only: a new one
            c.arguments, c.result = arguments, result
            out[id(k)] = c
    return out


def _merged_ids(kept: list[ToolCall], wrapper_of: dict[int, ToolCall]) -> dict[int, list[str]]:
    """id() of each call kept that wrappers were merged into -> their call ids (rule 0): the one call they make
    accounts for a requested call of one of them (rule 1), and so pairs with no other by name (rule 2)."""
    out: dict[int, list[str]] = {}
    for k in kept:
        ids = [outer.call_id for outer in _wrappers_of(k, wrapper_of) if outer.call_id]
        if ids:
            out[id(k)] = ids
    return out


def _by_id(
    requested: list[RequestedCall], executed: list[ToolCall], dropped: set[int]
) -> dict[str, list[RequestedCall]]:
    """Rule 1: drops the requested calls with an executed call's id, and copies; the rest by name, in order."""
    ran = {c.call_id for c in executed if c.call_id}
    kept: set[str] = set()  # ids of the requested calls kept so far
    left: dict[str, list[RequestedCall]] = {}  # name -> requested calls no executed call accounts for yet, in order
    for r in requested:
        cid = r.call_id
        if cid:
            if cid in ran or cid in kept:
                dropped.add(id(r))
                continue
            kept.add(cid)
        left.setdefault(r.name, []).append(r)
    return left


def _by_name(
    requested: list[RequestedCall],
    executed: list[ToolCall],
    left: dict[str, list[RequestedCall]],
    dropped: set[int],
    merged: dict[int, list[str]] | None = None,
) -> None:
    """Rule 2: each executed call no requested call has the id of (nor the id of a wrapper merged into it: `merged`,
    _merged_ids) takes the first requested call left of its name where one of the two has no id (a made-up `tw_`
    id is none: MADE_UP_ID)."""
    asked = {r.call_id for r in requested if r.call_id}
    for e in executed:
        cid = e.call_id
        if cid and cid in asked:
            continue  # matched by id (rule 1)
        if merged and any(w in asked for w in merged.get(id(e), ())):
            continue  # matched by a wrapper's id (rules 0 and 1): one call, which accounts for one requested call
        same = left.get(e.name)
        if not same:
            continue
        made_up = not cid or cid.startswith(MADE_UP_ID)
        for i, r in enumerate(same):
            if made_up or not r.call_id:
                dropped.add(id(r))
                del same[i]
                break


def reconcile_across(calls: list[ToolCall]) -> list[ToolCall]:
    """`calls` of several turns, each reconciled at its release (eval merges a run's turns): rule 1 only, a requested
    call left in one with the id of a call that ran in another, or of a requested call before it, is that call. No
    pairing by name (rule 2): each turn paired its own calls, and an id-less call that paired there is not paired
    again."""
    requested = [c for c in calls if isinstance(c, RequestedCall)]
    if not requested:
        return calls
    dropped: set[int] = set()
    _by_id(requested, [c for c in calls if not isinstance(c, RequestedCall)], dropped)
    return [c for c in calls if id(c) not in dropped] if dropped else calls
