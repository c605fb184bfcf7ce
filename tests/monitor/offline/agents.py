"""A small instrumented customer-support agent for the offline tests, with one known flaw per input."""

from __future__ import annotations

import contextvars
import itertools
import json
import random
import re
import threading
import time
from collections import Counter
from typing import Any

from opentelemetry import trace

from instrumentation import ToolExecutor, tool


@tool
def get_order_status(order_id: str) -> dict[str, Any]:
    """Status of an order."""
    return {"order_id": order_id, "status": "shipped"}


@tool
def get_shipping_eta(order_id: str) -> dict[str, Any]:
    """Shipping ETA of an order."""
    return {"order_id": order_id, "eta_days": 2}


@tool
def get_order_history(user_id: str) -> list[str]:
    """Past orders of a user."""
    return ["1", "2"]


EXECUTOR = ToolExecutor([get_order_status, get_shipping_eta, get_order_history], on_error="result")
_ORDER = re.compile(r"order (\d+)")
_calls: Counter[str] = Counter()
_lock = threading.Lock()


def support_agent(text: str) -> str:
    """Answers `where is order N` (with a flaw that depends on N), small talk, and `thanks` (a spurious call)."""
    m = _ORDER.search(text)
    if m is None:
        if text.lower().startswith("thanks"):
            EXECUTOR.execute("get_order_history", {"user_id": "u"})
        return "You're welcome!"
    n = m.group(1)
    if n == "3":
        EXECUTOR.execute("get_order_status", {"order_id": "9"})
    elif n == "4":
        EXECUTOR.execute("get_shipping_eta", {"order_id": n})
    elif n == "5":
        EXECUTOR.execute("get_order_status", {"order_id": n})
        EXECUTOR.execute("get_order_status", {"order_id": n})
    elif n == "6":
        EXECUTOR.execute("lookup_order", {"order_id": n})
    elif n == "7":
        pass
    elif n == "8":
        EXECUTOR.execute("get_order_status", "{bad json")
    else:
        EXECUTOR.execute("get_order_status", {"order_id": n})
    return f"Order {n} has shipped."


def flaky_agent(text: str) -> str:
    """Like support_agent, but order 20 is right only on odd-numbered runs, and order 99 hangs."""
    m = _ORDER.search(text)
    if m is not None and m.group(1) == "20":
        with _lock:
            _calls[text] += 1
            k = _calls[text]
        EXECUTOR.execute("get_order_status" if k % 2 else "get_shipping_eta", {"order_id": "20"})
        return "Order 20 has shipped."
    if m is not None and m.group(1) == "99":
        time.sleep(1.5)
    return support_agent(text)


def reset_flaky() -> None:
    with _lock:
        _calls.clear()


def raising_agent(text: str) -> str:
    EXECUTOR.execute("get_order_status", {"order_id": "1"})
    raise RuntimeError("model backend down")


def raising_on_hello(text: str, history: list[dict[str, str]] | None = None) -> str:
    """support_agent, but it raises on small talk (`hello`): some runs complete, some do not."""
    if text.lower().startswith("hello"):
        raise RuntimeError("model backend down")
    return support_agent(text)


SUPPORT_INPUTS = [
    "where is order 1", "where is order 2", "where is order 3", "where is order 4", "where is order 5",
    "where is order 6", "where is order 7", "where is order 8", "hello there", "thanks a lot",
]


def memory_agent(text: str, history: list[dict[str, str]]) -> str:
    """A two-turn support agent that takes the order id for follow-ups from its own previous answers only.

    Its first answer forgets the order number, so in free-run its follow-up has no id to look up.
    """
    m = _ORDER.search(text)
    if m is not None:
        EXECUTOR.execute("get_order_status", {"order_id": m.group(1)})
        return "It has shipped."
    if "arrive" in text:
        for msg in reversed(history):
            found = _ORDER.search(msg["content"].lower()) if msg["role"] == "assistant" else None
            if found is not None:
                EXECUTOR.execute("get_shipping_eta", {"order_id": found.group(1)})
                return f"Order {found.group(1)} should arrive in 2 days."
        return "Which order do you mean?"
    return "You're welcome!"


HANG_RELEASE = threading.Event()  # set by a test to let the hung runs of mostly_hang go on


def mostly_hang(text: str) -> str:
    """Right on `where is order 1`; on any other order it calls the wrong tool, hangs until HANG_RELEASE is set (at
    most 5 s), then calls the right one: that call comes after the run's timeout and must not count."""
    m = _ORDER.search(text)
    n = m.group(1) if m else ""
    if n == "1":
        return support_agent(text)
    EXECUTOR.execute("get_shipping_eta", {"order_id": n})
    HANG_RELEASE.wait(5)
    EXECUTOR.execute("get_order_status", {"order_id": n})
    return f"Order {n} has shipped."


LATE_DONE = threading.Event()  # set by late_caller once its hung run made its call after the timeout
_late_inputs: list[str] = []


def late_caller(text: str, history: list[dict[str, str]] | None = None) -> str:
    """Right on `where is order 1`. On `where is order 2` it hangs until HANG_RELEASE is set (at most 5 s), then makes
    the right call, after its run's timeout, and sets LATE_DONE. On `where is order 3` it first lets that hung run go on
    and waits (at most 5 s) for its late call, so the call ends while a later run is still going on."""
    m = _ORDER.search(text)
    n = m.group(1) if m else ""
    if n == "2":
        HANG_RELEASE.wait(5)
        EXECUTOR.execute("get_order_status", {"order_id": n})
        LATE_DONE.set()
        return f"Order {n} has shipped."
    if n == "3":
        HANG_RELEASE.set()
        LATE_DONE.wait(5)
        EXECUTOR.execute("get_order_status", {"order_id": n})
        return f"Order {n} has shipped."
    return support_agent(text)


def reset_late(inputs: list[str]) -> None:
    """Clears late_caller's events and gives `late_inputs` the inputs to return, in order."""
    HANG_RELEASE.clear()
    LATE_DONE.clear()
    _late_inputs[:] = inputs


def late_inputs(rng: random.Random) -> str:
    """A probe generator: the inputs given to `reset_late`, in order, then `where is order 1`."""
    return _late_inputs.pop(0) if _late_inputs else "where is order 1"


def delegating_agent(text: str) -> str:
    """Answers `where is order N` itself (the right call), and asks a sub-agent of its own, `history-bot`, for the
    user's past orders: the sub-agent's turn (its own `agent_turn`) makes the history call; with `hang` in the input
    it then hangs until HANG_RELEASE is set (at most 5 s)."""
    from instrumentation import agent_turn

    m = _ORDER.search(text)
    n = m.group(1) if m else ""
    EXECUTOR.execute("get_order_status", {"order_id": n})
    with agent_turn("past orders of the user", agent="history-bot") as sub:
        EXECUTOR.execute("get_order_history", {"user_id": "u"})
        sub.set_output("1, 2")
    if "hang" in text:
        HANG_RELEASE.wait(5)
    return f"Order {n} has shipped."


def threaded_agent(text: str, history: list[dict[str, str]] | None = None) -> str:
    """Runs its tool calls in plain threads, which do not carry the OpenTelemetry context: the calls belong to no
    turn (each one starts a trace of its own). One is the right call, one is a made-up tool."""
    m = _ORDER.search(text)
    n = m.group(1) if m else ""
    workers = [threading.Thread(target=EXECUTOR.execute, args=(name, {"order_id": n}))
               for name in ("get_order_status", "lookup_order")]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return f"Order {n} has shipped."


def dict_agent(text: str) -> dict[str, str]:
    """Makes the right call for `where is order N` and returns its answer in a dict, not as the answer text."""
    m = _ORDER.search(text)
    n = m.group(1) if m else ""
    EXECUTOR.execute("get_order_status", {"order_id": n})
    return {"answer": f"Order {n} has shipped."}


def _ping(n: int, message: str) -> None:
    if n == 0:
        raise ValueError(message)
    _pong(n - 1, message)


def _pong(n: int, message: str) -> None:
    _ping(n - 1, message)


def deep_raising_agent(text: str) -> str:
    """Raises 100 frames down (no two in a row alike, so none is folded), with the input as the message."""
    _ping(100, text)
    return "unreachable"


# Plain OpenTelemetry, no toolwatch instrumentation: a tracer of the global provider, taken at import (as an
# application does), GenAI-convention spans: the agent's own `invoke_agent` span with an `execute_tool` span in it.
_PLAIN = trace.get_tracer("plain-otel-agent")


def plain_otel_agent(text: str) -> str:
    m = _ORDER.search(text)
    n = m.group(1) if m else ""
    with _PLAIN.start_as_current_span("invoke_agent support") as turn:
        turn.set_attribute("gen_ai.operation.name", "invoke_agent")
        turn.set_attribute("gen_ai.agent.name", "support")
        with _PLAIN.start_as_current_span("execute_tool get_order_status") as span:
            span.set_attribute("gen_ai.operation.name", "execute_tool")
            span.set_attribute("gen_ai.tool.name", "get_order_status")
            span.set_attribute("gen_ai.tool.call.id", "call_1")
            span.set_attribute("gen_ai.tool.call.arguments", json.dumps({"order_id": n}))
    return f"Order {n} has shipped."


def order_inputs(rng: random.Random) -> str:
    """A probe generator: `where is order N`."""
    return f"where is order {rng.randint(1, 50)}"


async def cancelled_agent(text: str) -> str:
    """Makes the right call for `where is order N`, then its task is cancelled: asyncio.CancelledError, which is no
    Exception (a BaseException), ends the run."""
    import asyncio

    m = _ORDER.search(text)
    EXECUTOR.execute("get_order_status", {"order_id": m.group(1) if m else ""})
    raise asyncio.CancelledError("the model call was cancelled")


def exiting_agent(text: str, history: list[dict[str, str]] | None = None) -> str:
    """Makes the right call for `where is order N`, then calls sys.exit (SystemExit, a BaseException) as a script
    would on failure (a scenario's `history` is taken and ignored)."""
    import sys

    m = _ORDER.search(text)
    EXECUTOR.execute("get_order_status", {"order_id": m.group(1) if m else ""})
    sys.exit(3)


def logging_slow_agent(text: str) -> str:
    """Appends a line to the file named by TOOLWATCH_TEST_RUN_LOG as each run starts, then answers after 0.5 s."""
    import os

    with open(os.environ["TOOLWATCH_TEST_RUN_LOG"], "a", encoding="utf-8") as fh:
        fh.write(text + "\n")
    time.sleep(0.5)
    return support_agent(text)


def logging_hanging_agent(text: str) -> str:
    """Appends a line to the file named by TOOLWATCH_TEST_RUN_LOG as each run starts, then hangs for 60 s."""
    import os

    with open(os.environ["TOOLWATCH_TEST_RUN_LOG"], "a", encoding="utf-8") as fh:
        fh.write(text + "\n")
    time.sleep(60)
    return support_agent(text)


ASYNC_CANCELLED = threading.Event()  # set when hanging_async_agent's await is cancelled


async def hanging_async_agent(text: str) -> str:
    """Calls the wrong tool, then awaits a model reply that takes 3 s (the right call comes after it); sets
    ASYNC_CANCELLED when that await is cancelled."""
    import asyncio

    m = _ORDER.search(text)
    n = m.group(1) if m else ""
    EXECUTOR.execute("get_shipping_eta", {"order_id": n})
    try:
        await asyncio.sleep(3)
    except asyncio.CancelledError:
        ASYNC_CANCELLED.set()
        raise
    EXECUTOR.execute("get_order_status", {"order_id": n})
    return f"Order {n} has shipped."


@tool
def get_weather(city: str) -> str:
    """Weather of a city."""
    return "rain"


@tool
def get_time() -> str:
    """The time."""
    return "noon"


OFFERING = ToolExecutor([get_weather, get_time], on_error="result")
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def _offering_chat(definitions: list[dict[str, Any]]) -> None:
    """A GenAI model request span offering `definitions` (on toolwatch's tracer: that of the harness)."""
    from instrumentation import get_tracer

    attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
             "gen_ai.tool.definitions": json.dumps(definitions)}
    with get_tracer().start_as_current_span("chat m", attributes=attrs):
        pass


def offering_agent(text: str) -> str:
    """Offers its tools on model request spans only, none on its turn: its own chat span offers get_weather (a city
    required); a turn it opens itself under its own name (as a framework's invoke_agent span) offers get_weather again
    (any arguments: the first definition wins) and get_time, and there it calls get_weather with a town (no city) and
    get_time. With `hang` in the input it then hangs until HANG_RELEASE is set (at most 5 s), with a call of
    get_time of its own made before."""
    from instrumentation import agent_turn

    _offering_chat([{"type": "function", "name": "get_weather", "parameters": CITY}])
    with agent_turn(text, agent="support") as inner:
        _offering_chat([{"type": "function", "name": "get_weather", "parameters": {"type": "object"}},
                        {"type": "function", "name": "get_time", "parameters": {"type": "object"}}])
        OFFERING.execute("get_weather", {"town": "Oslo"})
        OFFERING.execute("get_time", {})
        inner.set_output("rain")
    if "hang" in text:
        OFFERING.execute("get_time", {})
        HANG_RELEASE.wait(5)
    return "Rain in Oslo."



@tool(name="get_order_status")
def _slow_order_status(order_id: str) -> dict[str, Any]:
    """Status of an order, after 0.2 s."""
    time.sleep(0.2)
    return {"order_id": order_id, "status": "shipped"}


def detached_call_agent(text: str) -> str:
    """Runs its tool in a thread under copy_context().run, as README says to, and answers without waiting for it:
    the call ends 0.2 s after the agent returns."""
    m = _ORDER.search(text)
    n = m.group(1) if m else "0"
    threading.Thread(target=contextvars.copy_context().run, args=(_slow_order_status, n), daemon=True).start()
    return f"Order {n} has shipped."


def logging_stalling_agent(text: str, history: list[dict[str, str]] | None = None) -> str:
    """Appends a line to the file named by TOOLWATCH_TEST_RUN_LOG as each run starts; answers as support_agent,
    except an input with `stall` in it, which hangs for 60 s (a scenario's `history` is taken and ignored)."""
    import os

    with open(os.environ["TOOLWATCH_TEST_RUN_LOG"], "a", encoding="utf-8") as fh:
        fh.write(text + "\n")
    if "stall" in text:
        time.sleep(60)
    return support_agent(text)


def logging_second_stalling_agent(text: str) -> str:
    """As logging_stalling_agent, but an input with `stall` in it hangs only the second time it runs (its trial 2 of
    a case run in order): the case's first trial is done, the second never is."""
    import os

    log = os.environ["TOOLWATCH_TEST_RUN_LOG"]
    with open(log, encoding="utf-8") as fh:
        seen = text in fh.read().splitlines()
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(text + "\n")
    if "stall" in text and seen:
        time.sleep(60)
    return support_agent(text)


_stall_draws = itertools.count(1)


def stalling_inputs(rng: random.Random) -> str:
    """A probe generator: `where is order 1`, `where is order 2` (the first two draws), then inputs that stall
    logging_stalling_agent."""
    n = next(_stall_draws)
    return f"where is order {n}" if n <= 2 else f"where is order {n} (stall)"


def hello_or_order_1(rng: random.Random) -> str:
    """A probe generator: `hello there` or `where is order 1` (raising_on_hello raises on the first only)."""
    return rng.choice(["hello there", "where is order 1"])


_signalling_runs = itertools.count(1)


def signalling_raiser(text: str) -> str:
    """raising_agent, but its second run first sends this process the signal named in TOOLWATCH_TEST_SIGNAL (SIGINT,
    SIGTERM) and waits (at most 5 s) to be stopped by it: every run done raised."""
    import os
    import signal

    if next(_signalling_runs) == 2:
        os.kill(os.getpid(), signal.Signals[os.environ["TOOLWATCH_TEST_SIGNAL"]])
        time.sleep(5)
    return raising_agent(text)


_draws = itertools.count(1)


def two_orders_then_raise(rng: random.Random) -> str:
    """A probe generator: `where is order 1`, `where is order 2`, then it raises (with --pool 1: after two runs)."""
    n = next(_draws)
    if n > 2:
        raise RuntimeError("no more ideas")
    return f"where is order {n}"
