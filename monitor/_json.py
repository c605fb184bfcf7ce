"""JSON text from span attributes parsed within a memory budget.

A JSON text of tiny containers parses to many times its size: measured (CPython 3.11, tracemalloc peak), 9 MB of
`[{},{},...]` built 216 MB in 1.3 s, `[{"a":1},...]` 24x its size, about 30-60 bytes per `{`, `[`, `,` or `:` (112
for one-key objects of distinct short keys and values: the estimate is no strict bound, at most ~1.1x under); a text
of long strings about its own size, 4x when one character needs 4 bytes. Commas and colons inside strings count too,
so the estimate of an ordinary chat history is 3-5x what it builds: one is refused only past about 24 MB (a character
not ASCII) to 32 MB (ASCII), where it would build 55-75 MiB; a model's context holds far less.

An attribute may be as long as a request body (`--max-decompressed-bytes`, 64 MiB by default), so a text past
PLAIN_CHARS is parsed only when its estimate (4 bytes a character, 1 for an ASCII text with no `\\u` escape, plus
PER_TOKEN bytes a `{`, `[`, `,` or `:`, counted with str.count) is within BUDGET; otherwise it is refused with
ValueError (a json.JSONDecodeError), as invalid JSON is, so every reader treats it as it treats text that is not
JSON. Texts up to PLAIN_CHARS parse as json.loads does, at no extra cost.
"""

from __future__ import annotations

import json
from typing import Any

PLAIN_CHARS = 1 << 20  # texts up to this many characters are parsed without an estimate (the C readers' bound too)
BUDGET = 256 << 20  # bytes a longer text's parse may build, estimated
PER_TOKEN = 100  # bytes estimated per `{`, `[`, `,` or `:` (measured: 30-112 by shape, see above)


def estimate(text: str) -> int:
    """Bytes parsing `text` is estimated to build (above the measured cost for every shape measured but one-key
    objects of distinct short keys, ~1.1x under)."""
    per_char = 1 if text.isascii() and "\\u" not in text else 4
    tokens = text.count("{") + text.count("[") + text.count(",") + text.count(":")
    return per_char * len(text) + PER_TOKEN * tokens


def refuse_if_costly(text: str) -> None:
    """Raise json.JSONDecodeError (a ValueError) when `text` is past PLAIN_CHARS and its estimate past BUDGET."""
    if len(text) > PLAIN_CHARS:
        cost = estimate(text)
        if cost > BUDGET:
            raise json.JSONDecodeError(
                f"JSON text of {len(text)} characters not parsed: it is estimated to build about {cost >> 20} MiB, "
                f"over the {BUDGET >> 20} MiB budget",
                "",
                0,
            )


def loads_bounded(text: str) -> Any:
    """json.loads(text), refused as invalid JSON (ValueError) when parsing it would build more than BUDGET."""
    if len(text) > PLAIN_CHARS:
        refuse_if_costly(text)
    return json.loads(text)
