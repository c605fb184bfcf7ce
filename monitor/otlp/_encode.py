"""Encode spans as OTLP JSON (the Collector file exporter's line format), for tests, fixtures and tools."""

from __future__ import annotations

import base64
import json
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

_ID_KEYS = ("traceId", "spanId", "parentSpanId")


def _fix_ids(obj: Any) -> None:
    # protobuf's JSON mapping writes bytes as base64; OTLP JSON wants trace and span ids as hex.
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in _ID_KEYS and isinstance(v, str):
                obj[k] = base64.b64decode(v).hex()
            else:
                _fix_ids(v)
    elif isinstance(obj, list):
        for v in obj:
            _fix_ids(v)


def request_to_json(request: ExportTraceServiceRequest) -> str:
    """One ExportTraceServiceRequest as one line of OTLP JSON (hex ids, int64 as strings, enums as ints)."""
    doc = json_format.MessageToDict(request, use_integers_for_enums=True)
    _fix_ids(doc)
    return json.dumps(doc, separators=(",", ":"))
