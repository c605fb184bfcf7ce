"""Text the OTLP protobuf encoding can carry."""

from __future__ import annotations


def wire_safe(text: str) -> str:
    """`text` with any lone surrogate written as a `\\udXXX` escape: protobuf cannot encode one, and the exporter
    then drops the attribute (or, in a span name, fails the whole request). In JSON text the escape is the same
    value. Lone surrogates come from a model's half emoji (`"\\ud83d"` parses to one) or `surrogateescape`. A value
    that is not a str (an int call id from a dispatch loop) is written as its str(): recording must not keep the
    tool from running."""
    if not isinstance(text, str):
        try:
            text = str(text)
        except Exception:  # noqa: BLE001 - a __str__ that raises
            text = f"<unprintable {type(text).__name__}>"
    if text.isascii():
        return text
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode()
    return text
