"""The optional C decoders built by setup.py: one pass over the wire bytes straight to Span records.

Loaded once at import. `None` when the extension was not built (no C compiler at install time) or when the
environment sets TOOLWATCH_PURE_PYTHON=1; the pure-Python decoders are then used, with the same results.
"""

from __future__ import annotations

import importlib
import logging
import os
from types import ModuleType

from monitor.otlp._span import Span, SpanEvent

PURE_PYTHON_ENV = "TOOLWATCH_PURE_PYTHON"

logger = logging.getLogger(__name__)


def load_extension(module: str, *init_args: object) -> ModuleType | None:
    """The C extension `module`, initialised with `init(*init_args)`; None when it was not built (no C compiler
    at install time), its `init` refuses (ImportError; a TypeError: it takes other arguments, built from other
    sources, as an in-place build of an earlier checkout is: logged), or the environment sets
    TOOLWATCH_PURE_PYTHON=1."""
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return None
    try:
        mod = importlib.import_module(module)
        mod.init(*init_args)
    except ImportError:  # not built (no C compiler at install time), or built from other sources
        return None
    except TypeError as exc:  # its init takes other arguments: built from other sources (the import must not fail)
        logger.warning("%s was built from other sources (%s): the Python code is used; rebuild it", module, exc)
        return None
    return mod


CPB = load_extension("monitor.otlp._cpb", Span, SpanEvent)
CJSON = load_extension("monitor.otlp._cjson", Span, SpanEvent)


def accelerated() -> dict[str, bool]:
    """Which parts run in C: {"protobuf": bool, "json": bool, "normalize": bool (the GenAI normalizer's),
    "assembly": bool (the turn assembler's add_records and poll), "judge": bool (the judge's plans), "tally": bool
    (Tally.add), "batch": bool (VerdictBatch.groups)}."""
    # here, not at the top: monitor.normalize, monitor.assembly and monitor.judge import monitor.otlp
    from monitor.assembly import _assembler
    from monitor.judge import _plan, _tally
    from monitor.metrics import _batch
    from monitor.normalize import _genai

    return {
        "protobuf": CPB is not None,
        "json": CJSON is not None,
        "normalize": _genai._CONVERT_C is not None,
        "assembly": _assembler._ADD_C is not None,
        "judge": _plan._C is not None,
        "tally": _tally._ADD_C is not None,
        "batch": _batch._GROUPS_C is not None,
    }
