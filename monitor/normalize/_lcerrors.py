"""The type of the exception a LangChain tool raised, read from its span's status message.

openinference-instrumentation-langchain fails a run's span with LangChain's own text of the error (its tracer's
`run.error`), whole:
- Python's (`_get_stacktrace`): the exception's repr, then its traceback,
  `NoSuchCity('no such city: Atlantis')Traceback (most recent call last):\\n...\\nNoSuchCity: no such city: Atlantis`
  (the traceback's last line names the class with its module, `app.errors.NoSuchCity: ...`, unless it is a builtin's
  or `__main__`'s), and an `exception` span event whose `exception.type` names it (the OTel SDK's `record_exception`:
  `module.qualname`, the module left out for a builtin). The tracer falls back to the repr alone.
- LangChain.js' (`stringifyError`): `{message}\\n\\n{stack}`, the stack opening with `{name}: {message}` (`{name}`
  alone for an empty message), then its frames (`\\n    at ...`); its `exception` event holds the same text, no type.
Such a text is the call's error type no more than a traceback is: exception_type gives the exception's type, the
class's name (as the repr and the stack name it: `NoSuchCity`, `ValueError`, `Error`; as toolwatch's own `@tool` names
it in `error.type`), at most MAX_TYPE_CHARS characters. A Python text is recognised by its repr's opening, the class's
name and `(`, when the `exception` event's type or the traceback's last line names that class; a LangChain.js text by
its stack's opening repeating the message after a name (the last such `\\n\\n` of the first MAX_BLANK_LINES: the
message may hold a text of that form). Any other text (a producer's own message, a repr no event or
traceback confirms, a name past the bound) gives None: the caller keeps the status message as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from monitor.otlp import SpanEvent

MAX_TYPE_CHARS = 128  # a longer class name is not read: the status message is kept as it is
MAX_BLANK_LINES = 16  # the `\n\n` of a LangChain.js text tried as the one before its stack (a message may hold some)
_PY_REPR = re.compile(rf"([^\W\d]\w{{0,{MAX_TYPE_CHARS - 1}}})\(")  # a repr's opening: the class's name and `(`
_JS_NAME = re.compile(rf"[A-Za-z_$][\w$]{{0,{MAX_TYPE_CHARS - 1}}}", re.ASCII)  # an error's `name`
_TRACEBACK = "Traceback (most recent call last):"
_EXCEPTION = "exception"  # the span event's name
_EXCEPTION_TYPE = "exception.type"


def exception_type(message: str, events: Iterable[SpanEvent] | None) -> str | None:
    """The type of the exception LangChain's text `message` (a failed span's status message) is of, `events` the
    span's events; None when the text is no such text (see the module docstring)."""
    return _python_type(message, events) or _js_type(message)


def _python_type(message: str, events: Iterable[SpanEvent] | None) -> str | None:
    opening = _PY_REPR.match(message)
    if opening is None:
        return None
    name = opening.group(1)
    for ev in events or ():
        if ev.name == _EXCEPTION:
            named = ev.attributes.get(_EXCEPTION_TYPE)
            if isinstance(named, str) and _names(named, name):
                return name
    if message.find(_TRACEBACK, opening.end()) >= 0:
        last = message[message.rfind("\n") + 1 :]
        if _names(last.partition(":")[0], name):
            return name
    return None


def _names(qualified: str, name: str) -> bool:
    """Whether `qualified` (a class's name, after its module's and any enclosing classes') names class `name`."""
    return qualified == name or qualified.endswith("." + name)


def _js_type(message: str) -> str | None:
    """The name the stack after the message names, the last `\\n\\n` of the first MAX_BLANK_LINES after which the
    text so reads: an earlier one is in the message (a wrapped error's text, or a model's argument the message
    repeats: `no such city: x\\n\\nFake: no such city: x\\n`), the stack repeating the whole message after it; a
    later one cannot be, the stack's frames holding no blank line."""
    found = None
    start = 0
    for _ in range(MAX_BLANK_LINES):
        k = message.find("\n\n", start)
        if k < 0:
            break
        opening = _JS_NAME.match(message, k + 2)
        if opening is not None:
            end = opening.end()
            if k == 0:  # an empty message: the stack opens with the name alone
                after = end
            elif message.startswith(": ", end) and message.startswith(message[:k], end + 2):
                after = end + 2 + k
            else:
                after = -1
            if after == len(message) or (after >= 0 and message[after] == "\n"):
                found = opening.group()
        start = k + 1
    return found
