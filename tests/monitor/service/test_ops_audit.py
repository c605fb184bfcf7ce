"""Operational audit of `toolwatch serve`, each case on a real server in a subprocess on 127.0.0.1."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.monitor.service.conftest import RULES, ready_line, stop_process, wait_for
from tests.monitor.service.http_util import post
from tests.monitor.service.spans import Call, TurnSpec, record_turns, to_request

TOOLWATCH = str(Path(sys.executable).parent / "toolwatch")
ROOT = str(Path(__file__).resolve().parents[3])  # the server runs this checkout's code, as the tests do
OK = "Result: ok"


def _turns(text: str, n: int) -> list[TurnSpec]:
    return [TurnSpec(f"[BILL] {text}", [Call("pull_auth_telemetry", {"log_excerpt": text})], output_text=OK)] * n


def _send(endpoint: str, turns: list[TurnSpec]) -> None:
    status, _, _ = post(endpoint, to_request(record_turns(turns)).SerializeToString(), "application/x-protobuf")
    assert status == 200


def _metric(metrics_url: str, name: str) -> float:
    import urllib.request

    with urllib.request.urlopen(metrics_url, timeout=10) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


def _spawn(args: list[str], env: dict[str, str], **popen: object) -> tuple[subprocess.Popen[str], str, str]:
    """`toolwatch serve` started and ready: the process, its OTLP/HTTP endpoint and its ready line."""
    proc: subprocess.Popen[str] = subprocess.Popen(  # type: ignore[call-overload]
        [TOOLWATCH, "serve", "--rules", str(RULES), "--port", "0", "--metrics-port", "0", "--no-watch", *args],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT, "PYTHONDONTWRITEBYTECODE": "1", **env},
        **popen,
    )
    assert proc.stderr is not None
    line = ready_line(proc.stderr)
    endpoint = line.split("OTLP/HTTP on ")[1].split(",")[0].strip()
    return proc, endpoint, line


def _end(proc: subprocess.Popen[str]) -> str:
    stop_process(proc)
    assert proc.stderr is not None
    err = proc.stderr.read()
    proc.stderr.close()
    return err


@pytest.mark.skipif(not hasattr(resource, "prlimit"), reason="raises the server's file size limit while it runs")
def test_a_write_cut_short_by_a_full_device_leaves_no_broken_line_in_the_verdict_log(tmp_path: Path) -> None:
    """The device fills up in the middle of a flush: the part of a line written before it stays in the file. Once
    there is room again, the next record was appended to that part: one line of broken JSON that also swallowed a
    whole record (`jq` stops there). A file size limit (RLIMIT_FSIZE, EFBIG) cuts the write as a full disk does."""
    log = tmp_path / "v.jsonl"
    limit = 3000  # bytes: a few lines, then a line cut in two (the first flush writes 8 KiB)

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    proc, endpoint, ready = _spawn(
        ["--verdict-log", str(log), "--verdict-log-all"], {"TOOLWATCH_GRACE": "0.05s"}, preexec_fn=small_files
    )
    metrics = ready.split("metrics on ")[1].split(" ")[0].strip().rstrip(",")
    try:
        _send(endpoint, _turns("before", 40))
        wait_for(lambda: _metric(metrics, "toolwatch_verdict_log_lines_lost_total") > 0)
        assert log.stat().st_size <= limit
        resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        time.sleep(1.2)  # the log is opened again (within a second of the failure)
        _send(endpoint, _turns("after", 30))
    finally:
        err = _end(proc)
    assert proc.returncode == 0, err
    lines = log.read_bytes().split(b"\n")
    assert lines[-1] == b"", "the file ends with a whole line"
    records = [json.loads(line) for line in lines[:-1]]  # every line a whole record
    assert sum(r["input"] == "[BILL] after" for r in records) == 30
    assert 0 < sum(r["input"] == "[BILL] before" for r in records) < 40


def _export(endpoint: str, authorization: str) -> object:
    """One turn span exported by the OpenTelemetry SDK's OTLP/HTTP exporter with this Authorization header."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    exporter = OTLPSpanExporter(endpoint=endpoint, headers={"Authorization": authorization}, timeout=10)
    try:
        return exporter.export(record_turns(_turns("token", 1)))
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]


def test_a_token_read_with_its_trailing_newline_still_lets_exporters_in(tmp_path: Path) -> None:
    """A token from a file keeps the file's last newline (a Kubernetes Secret made `--from-file`, given as
    TOOLWATCH_TOKEN): a header value never holds leading or trailing whitespace (RFC 9110 5.5), so no exporter could
    send it, and every export was refused with 401, which exporters do not retry."""
    from opentelemetry.sdk.trace.export import SpanExportResult

    proc, endpoint, ready = _spawn(["--grpc-port", "0"], {"TOOLWATCH_TOKEN": "s3cret\n"})
    grpc = ready.split("OTLP/gRPC on ")[1].split(" ")[0]
    try:
        assert _export(endpoint, "Bearer s3cret") == SpanExportResult.SUCCESS
        assert _export(endpoint, "Bearer wrong") == SpanExportResult.FAILURE
        assert _grpc_export(grpc, insecure=True, headers={"authorization": "Bearer s3cret"}) == SpanExportResult.SUCCESS
    finally:
        err = _end(proc)
    assert proc.returncode == 0, err


def _grpc_export(endpoint: str, **kwargs: Any) -> Any:
    """One batch of turns through the SDK's OTLP/gRPC exporter to `endpoint`: its SpanExportResult."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

    exporter = GrpcExporter(endpoint=endpoint, timeout=10, **kwargs)
    try:
        return exporter.export(record_turns(_turns("grpc", 1)))
    finally:
        exporter.shutdown()


def test_the_grpc_address_serve_prints_at_start_is_one_an_exporter_can_be_given_as_it_is() -> None:
    """The start line names the OTLP/gRPC listener in the form to set as the endpoint: `http://host:port`. Printed
    bare (`127.0.0.1:4317`), copied into OTEL_EXPORTER_OTLP_ENDPOINT it made the gRPC exporter connect with TLS,
    which the plaintext listener refuses on every export."""
    from opentelemetry.sdk.trace.export import SpanExportResult

    proc, _, ready = _spawn(["--grpc-port", "0"], {})
    grpc = ready.split("OTLP/gRPC on ")[1].split(" ")[0].rstrip(",")
    try:
        assert grpc.startswith("http://"), ready
        assert _grpc_export(grpc) == SpanExportResult.SUCCESS  # no insecure=: the scheme decides, as from the variable
    finally:
        err = _end(proc)
    assert proc.returncode == 0, err


def test_a_token_of_whitespace_alone_is_refused_at_start() -> None:
    """Once its surrounding whitespace is set aside nothing is left: serving without a token would let anyone in."""
    proc = subprocess.run(
        [TOOLWATCH, "serve", "--rules", str(RULES), "--port", "0", "--metrics-port", "0", "--token", " \n"],
        capture_output=True, text=True, timeout=30, env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert proc.returncode == 2 and "token" in proc.stderr, proc.stderr


@pytest.mark.parametrize(("token", "said"), [
    (b"s3\xffcret", "not UTF-8"),  # os.environ holds it with a surrogate, which .encode() refused: a traceback
    (b"s3\x01cret", "control character"),  # no header value (nor gRPC metadata) holds one: no client sends it
    (b"s3\ncret", "control character"),
])
def test_a_token_no_client_can_send_is_refused_at_start_with_a_clear_error(token: bytes, said: str) -> None:
    env = {**os.environb, b"PYTHONPATH": ROOT.encode(), b"TOOLWATCH_TOKEN": token}
    proc = subprocess.run(
        [TOOLWATCH, "serve", "--rules", str(RULES), "--port", "0", "--metrics-port", "0"],
        capture_output=True, text=True, timeout=30, env=env,
    )
    assert proc.returncode == 2, proc.stderr
    assert said in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("tail", [b"hello: world", b'["not", "a record"', b"x" * 5000, b'{"agent": "x", "time": 1}'])
def test_the_verdict_log_leaves_a_last_line_alone_that_it_did_not_write(tmp_path: Path, tail: bytes) -> None:
    """Only the piece of a record a write cut short is cut when the log opens: a file given as the log by mistake
    (a YAML file without its last newline), or a tail longer than any record, keeps its bytes."""
    from monitor.serve._verdict_log import VerdictLog

    path = tmp_path / "given.log"
    body = b"first line\n" + tail
    path.write_bytes(body)
    log = VerdictLog(path, max_bytes=4096)
    log.close()
    assert path.read_bytes() == body


def test_the_verdict_log_leaves_a_json_file_without_a_newline_given_by_mistake_whole(tmp_path: Path) -> None:
    """A JSON file as `json.dump` writes it (`{"` first, no newline at its end) has no whole line: it was cut to
    nothing, as if all of it were the piece of a record. Every record begins `{"time":`; other JSON is no piece."""
    from monitor.serve._verdict_log import VerdictLog

    path = tmp_path / "settings.json"
    body = b'{"rules": ["rules/triage.yaml"], "port": 4318}'
    path.write_bytes(body)
    VerdictLog(path, max_bytes=4096).close()
    assert path.read_bytes() == body


@pytest.mark.parametrize("piece", [b'{"', b'{"tim', b'{"time":1712.5,"agent":"a","trace_id":"b","ca'])
def test_the_verdict_log_cuts_the_piece_of_its_own_record_left_by_a_cut_write(
    tmp_path: Path, piece: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    """The piece is cut, and the log says so (the bytes of a record lost, and where)."""
    from monitor.serve._verdict_log import VerdictLog

    path = tmp_path / "verdicts.jsonl"
    path.write_bytes(b'{"time":1712.4,"trace_id":"a"}\n' + piece)
    with caplog.at_level("WARNING", logger="monitor.serve._verdict_log"):
        VerdictLog(path, max_bytes=4096).close()
    assert path.read_bytes() == b'{"time":1712.4,"trace_id":"a"}\n'
    assert f"{len(piece)} bytes" in caplog.text and str(path) in caplog.text


@pytest.mark.parametrize("token", ["my s3cret", "s3cr\u00e9t"])
def test_a_token_with_a_space_or_a_non_ascii_letter_still_lets_the_http_exporter_in(token: str) -> None:
    """Header values carry spaces and, as bytes, UTF-8 letters: such a token worked over HTTP (curl, the OTel
    exporters) before tokens were checked at start, and still does (gRPC metadata is ASCII: not there)."""
    proc, endpoint, _ = _spawn([], {"TOOLWATCH_TOKEN": token})
    try:
        from opentelemetry.sdk.trace.export import SpanExportResult

        if token.isascii():
            assert _export(endpoint, f"Bearer {token}") == SpanExportResult.SUCCESS
        import http.client
        from urllib.parse import urlsplit

        url = urlsplit(endpoint)
        conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=30)
        body = to_request(record_turns(_turns("utf8", 1))).SerializeToString()
        conn.putrequest("POST", url.path)
        conn.putheader("Content-Type", "application/x-protobuf")
        conn.putheader("Content-Length", str(len(body)))
        conn.putheader("Authorization", f"Bearer {token}".encode())  # the bytes as curl sends them: UTF-8
        conn.endheaders(body)
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        err = _end(proc)
    assert proc.returncode == 0, err


def test_the_verdict_log_keeps_a_whole_last_record_missing_only_its_newline(tmp_path: Path) -> None:
    """A write cut just before a record's newline leaves the whole record: it gets its newline, nothing is cut."""
    from monitor.serve._verdict_log import VerdictLog

    path = tmp_path / "verdicts.jsonl"
    whole = b'{"time":1712.4,"trace_id":"a"}\n{"time":1712.5,"trace_id":"b"}'
    path.write_bytes(whole)
    VerdictLog(path, max_bytes=4096).close()
    assert path.read_bytes() == whole + b"\n"
