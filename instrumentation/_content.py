"""Content capture: the settings, JSON serialization, redaction and truncation of recorded content.

Tool arguments and results (`gen_ai.tool.call.arguments` / `.result`) are recorded only when content
capture is on: off by default, on with `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` or
`configure(capture_content=True)`.

The turn's input and final answer (`gen_ai.input.messages` / `gen_ai.output.messages`) follow their own
switch, `capture_turn_messages`, which is ON by default (env `TOOLWATCH_CAPTURE_TURN_MESSAGES`): the
monitor needs the input text to judge which tools a turn should call. It is off when the standard variable
is set to anything but true (an explicit "no message content"), unless `TOOLWATCH_CAPTURE_TURN_MESSAGES=true`.
Turn it off where user input may not leave the process; the monitor then cannot judge routing for those turns.

Nothing here raises into the agent: an unserializable value is recorded through `repr()` (or a marker),
a failing redaction hook leaves the content out, and both are logged and counted.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import Span

from instrumentation import _attributes as A
from instrumentation._clip import LEAST_CHARS, SCALARS, Circular, clip, clip_arguments, model_dump_of, room_left
from instrumentation._context import TRACING
from instrumentation._stats import STATS
from instrumentation._wire import wire_safe

logger = logging.getLogger(__name__)

DEFAULT_MAX_CONTENT_LENGTH = 16384
"""Characters of one content attribute kept before it is truncated (and marked `toolwatch.truncated`)."""

RedactHook = Callable[[str, dict[str, Any]], Mapping[str, Any]]
"""`hook(tool_name, arguments) -> arguments to record`. Runs after key redaction, on a detached copy (plain data)."""

_TRUE = frozenset({"true", "1", "yes", "on", "span_only", "span_and_event"})
_FALSE = frozenset({"false", "0", "no", "off", "", "no_content", "event_only"})


def env_flag(name: str, default: bool) -> bool:
    """Read a boolean environment variable; an unknown value warns and gives `default`."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    logger.warning("ignoring %s=%r: expected true or false; using %s", name, raw, default)
    return default


def env_int(name: str, default: int, minimum: int = 1) -> int:
    """Read a positive integer environment variable; a bad value warns and gives `default`."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw)
    except ValueError:
        logger.warning("ignoring %s=%r: not an integer; using %d", name, raw, default)
        return default
    if value < minimum:
        logger.warning("ignoring %s=%r: must be >= %d; using %d", name, raw, minimum, default)
        return default
    return value


@dataclass(frozen=True, slots=True)
class ContentSettings:
    """What content is recorded, and how it is redacted and bounded."""

    capture_content: bool = False
    capture_turn_messages: bool = True
    max_length: int = DEFAULT_MAX_CONTENT_LENGTH
    redact_keys: frozenset[str] = frozenset()
    redact_pattern: re.Pattern[str] | None = None
    redact_hook: RedactHook | None = None
    needs_redaction: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        if self.max_length < 16:
            raise ValueError(f"max_length must be at least 16 characters, got {self.max_length}")
        flag = bool(self.redact_keys or self.redact_pattern is not None or self.redact_hook is not None)
        object.__setattr__(self, "needs_redaction", flag)

    @classmethod
    def from_env(cls) -> ContentSettings:
        content = env_flag(A.ENV_CAPTURE_CONTENT, False)
        # The standard switch set to anything but true says "no message content": the turn's messages too, unless
        # TOOLWATCH_CAPTURE_TURN_MESSAGES says otherwise. Unset (or empty), they are recorded.
        said_no = not content and bool(os.environ.get(A.ENV_CAPTURE_CONTENT, "").strip())
        return cls(
            capture_content=content,
            capture_turn_messages=env_flag(A.ENV_CAPTURE_TURN_MESSAGES, not said_no),
            max_length=env_int(A.ENV_MAX_CONTENT_LENGTH, DEFAULT_MAX_CONTENT_LENGTH, minimum=16),
        )


def make_settings(
    *,
    base: ContentSettings,
    capture_content: bool | None = None,
    capture_turn_messages: bool | None = None,
    max_length: int | None = None,
    redact_keys: Iterable[str] | None = None,
    redact_pattern: str | re.Pattern[str] | None = None,
    redact_hook: RedactHook | None = None,
) -> ContentSettings:
    """`base` with the given fields replaced (None keeps the base value)."""
    pattern = re.compile(redact_pattern) if isinstance(redact_pattern, str) else redact_pattern
    return ContentSettings(
        capture_content=base.capture_content if capture_content is None else capture_content,
        capture_turn_messages=base.capture_turn_messages if capture_turn_messages is None else capture_turn_messages,
        max_length=base.max_length if max_length is None else max_length,
        redact_keys=base.redact_keys if redact_keys is None else frozenset(k.casefold() for k in redact_keys),
        redact_pattern=base.redact_pattern if pattern is None else pattern,
        redact_hook=base.redact_hook if redact_hook is None else redact_hook,
    )


class _Settings:
    """Holder of the current settings; replaced as a whole, read without a lock on the hot path."""

    __slots__ = ("current",)

    def __init__(self) -> None:
        self.current = ContentSettings.from_env()


SETTINGS = _Settings()


def _default(obj: Any) -> Any:
    """JSON fallback for values json cannot encode: well-known shapes first, then `repr()`."""
    if isinstance(obj, enum.Enum):
        return obj.value
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, (set, frozenset)):
        return list(obj)
    if isinstance(obj, (datetime.date, datetime.time)):
        return obj.isoformat()
    dump = model_dump_of(obj)  # pydantic v2 models
    if dump is not None:
        return dump(mode="json")
    STATS.serialization_fallbacks += 1
    return repr(obj)


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_default, check_circular=False)


def _make_encode() -> Callable[[Any], str]:
    """The C encoder built once (`JSONEncoder.encode` builds one per call); no circular check, so a
    circular value ends in RecursionError, which `to_json` turns into a marker."""
    make = getattr(json.encoder, "c_make_encoder", None)
    basestring: Callable[[str], str] = json.encoder.encode_basestring
    if make is None:  # pragma: no cover - interpreters without the C accelerator
        return _ENCODER.encode
    c_encode = make(None, _default, basestring, None, ":", ",", False, False, True)

    def encode(value: Any) -> str:
        if value.__class__ is str:
            return basestring(value)
        return "".join(c_encode(value, 0))

    return encode


_encode = _make_encode()


def to_json(value: Any) -> str:
    """`value` as compact JSON (non-ASCII kept); unserializable parts through `repr()`; never raises."""
    try:
        return _encode(value)
    except Exception as exc:  # noqa: BLE001 - circular references, broken __repr__, ...
        return _marker(value, type(exc).__name__)


def _marker(value: Any, error: str) -> str:
    """The JSON text recorded for a value that could not be serialized (`error` names why), counted and logged."""
    STATS.serialization_fallbacks += 1
    logger.debug("content not serializable (%s): recording a marker", error)
    return _encode(f"<unserializable {type(value).__name__}: {error}>")


def to_json_prefix(value: Any, limit: int, count_keys: bool = True) -> str:  # noqa: C901 - inlined: hot path
    """`to_json(value)`, or when that is certainly longer than `limit` characters, a text of more than `limit`
    characters whose first `limit` are those of `to_json(value)` (what a content attribute keeps), made from a
    bounded copy (`_clip.clip`) rather than the whole value: a tool's huge argument or result (a list, a dataclass,
    a model ...) cost the call its whole JSON encoding. Never raises. On the hot path: an argument dict's items are
    counted inline, and `_encode` is called directly. `count_keys=False` leaves a dict's keys uncounted, for
    keys known to be short strings (a function's parameter names)."""
    try:
        kind = type(value)
        if kind is str and len(value) < limit:
            return _encode(value)
        if kind is dict:
            room = limit - 4 * len(value)  # as in room_left
            if room >= 0 and count_keys:
                for key in value:  # the keys' characters
                    if type(key) is not str:  # a number, a bad key ...: clipped (which raises as the encoder would)
                        room = -1
                        break
                    room -= len(key)
            if room >= 0:
                for item in value.values():
                    item_kind = type(item)
                    if item_kind is str:
                        room -= len(item) + 1
                    elif item_kind in LEAST_CHARS:
                        room = room_left(item, room)
                    elif item_kind in SCALARS:
                        room -= 1
                    else:  # a dataclass, a model, a subclass ...: clipped, not encoded whole
                        room = -1
                        break
                if room >= 0:
                    return _encode(value)
        elif room_left(value, limit) >= 0:
            return _encode(value)
    except Exception:  # noqa: BLE001 - a circular or very deep value, a bad key ...: to_json makes the marker
        return to_json(value)
    return _clipped_json(value, limit)


def _clipped_json(value: Any, limit: int) -> str:
    """The JSON of `clip(value)` (see `to_json_prefix`), or the marker of `value`; never raises."""
    try:
        return _encode(clip(value, limit + 1))
    except Circular:
        return _marker(value, "RecursionError")
    except RecursionError:  # deeper than the walk of clip goes (the C encoder goes deeper): encoded whole, as before
        return to_json(value)
    except Exception as exc:  # noqa: BLE001 - a raising __repr__, property or model_dump, a bad key ...
        return _marker(value, type(exc).__name__)


def _key_redacted(key: object, settings: ContentSettings) -> bool:
    if not isinstance(key, str):
        return False
    if key.casefold() in settings.redact_keys:
        return True
    return settings.redact_pattern is not None and settings.redact_pattern.search(key) is not None


def redact(tool_name: str, arguments: Mapping[str, Any], settings: ContentSettings) -> Mapping[str, Any] | None:
    """The arguments to record: a bounded copy (`_clip.clip_arguments`, each argument cut where its recorded text
    would be) with keys redacted at any depth (in mappings, dataclasses and models alike), then passed to the user
    hook. The hook gets plain data (dicts, lists, strings, numbers) that shares nothing with the tool's arguments,
    so it cannot change what the tool receives. None if either failed (a self-referential or very deep argument,
    a broken hook)."""
    keyed = bool(settings.redact_keys) or settings.redact_pattern is not None
    try:
        redacted = clip_arguments(
            arguments,
            settings.max_length + 1,
            (lambda key: _key_redacted(key, settings)) if keyed else None,
            A.REDACTED,
        )
    except Exception:  # noqa: BLE001 - RecursionError on a cycle, a mapping whose items() raises, ...
        STATS.redaction_failures += 1
        logger.warning("redacting the arguments of tool %r failed; arguments not recorded", tool_name, exc_info=True)
        return None
    hook = settings.redact_hook
    if hook is None:
        return redacted
    try:
        out = hook(tool_name, redacted)
        if not isinstance(out, Mapping):
            raise TypeError(f"redaction hook returned {type(out).__name__}, expected a mapping")
        return out
    except Exception:  # noqa: BLE001 - a broken hook must not break the tool call
        STATS.redaction_failures += 1
        logger.warning("redaction hook failed for tool %r; arguments not recorded", tool_name, exc_info=True)
        return None


def bounded(text: str, key: str, attributes: dict[str, Any], max_length: int) -> None:
    """Store `text` under `key`, cut at `max_length` characters (or the SDK's lower attribute length limit) with
    the cut listed in `toolwatch.truncated`."""
    max_length = TRACING.content_limit(max_length)
    text = wire_safe(text)
    if len(text) > max_length:
        text = text[:max_length]
        marked = attributes.get(A.TOOLWATCH_TRUNCATED)
        attributes[A.TOOLWATCH_TRUNCATED] = (*marked, key) if marked else (key,)
    attributes[key] = text


def set_bounded(span: Span, text: str, key: str, max_length: int) -> None:
    """`bounded` onto a span already started: a cut is added to the keys its `toolwatch.truncated` lists."""
    extra: dict[str, Any] = {}
    marked = (getattr(span, "attributes", None) or {}).get(A.TOOLWATCH_TRUNCATED)
    if marked:
        extra[A.TOOLWATCH_TRUNCATED] = tuple(marked)
    bounded(text, key, extra, max_length)
    span.set_attributes(extra)
