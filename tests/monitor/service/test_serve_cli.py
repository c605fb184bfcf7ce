"""`toolwatch serve` as a user meets it: option checks, start-up errors, --help."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from monitor.cli import main
from monitor.cli.serve_cmd import serve, settings_from_options
from monitor.serve import Settings, port_clash
from monitor.serve._body import DEFLATE, GZIP, ZSTD
from tests.monitor.service.conftest import RULES, ServeFactory

TOOLWATCH = str(Path(sys.executable).parent / "toolwatch")


def _serve_exits(args: list[str], timeout: float = 30.0) -> tuple[int, str]:
    """Run `toolwatch serve ARGS`, which must exit by itself (a bind error); returns its exit code and stderr."""
    proc = subprocess.Popen(
        [TOOLWATCH, "serve", "--rules", str(RULES), "--no-watch", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"toolwatch serve {' '.join(args)} kept running: {err}")
    return proc.returncode, err


@pytest.mark.parametrize("option", ["--port", "--metrics-port", "--grpc-port"])
def test_a_second_serve_on_a_busy_port_fails_naming_the_option(
    serve: ServeFactory, tmp_path: Path, option: str
) -> None:
    # gRPC sets SO_REUSEPORT by default: a second server on the same --grpc-port used to start and take part of
    # the first one's exports. Every port must be refused alike, and no verdict log file created.
    _, first = serve(grpc_port=0)
    busy = {"--port": first.port, "--metrics-port": first.metrics_port, "--grpc-port": first.grpc_port}[option]
    ports = {"--port": 0, "--metrics-port": 0, "--grpc-port": 0, option: busy}
    log = tmp_path / "logs" / "verdicts.jsonl"
    args = [arg for opt, port in ports.items() for arg in (opt, str(port))] + ["--verdict-log", str(log)]
    code, err = _serve_exits(args)
    assert code == 1, err
    assert f"127.0.0.1:{busy}" in err and "Address already in use" in err and f"another {option}" in err, err
    assert "Traceback" not in err
    assert not log.exists() and not log.parent.exists()


def test_an_address_not_of_this_machine_names_host() -> None:
    code, err = _serve_exits(["--host", "192.0.2.1", "--port", "0", "--metrics-port", "0"])  # TEST-NET-1
    assert code == 1, err
    assert "192.0.2.1:0 for OTLP/HTTP" in err and "check --host" in err and "--port" not in err, err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("first", "second"), [("--port", "--grpc-port"), ("--port", "--metrics-port"), ("--grpc-port", "--metrics-port")]
)
def test_two_listeners_on_one_port_are_a_usage_error(first: str, second: str) -> None:
    # It used to bind the first, fail on the second and blame "another process" holding the port.
    port = str(_free_port())
    ports = {"--port": "0", "--metrics-port": "0", "--grpc-port": "0", first: port, second: port}
    args = [arg for opt, p in ports.items() for arg in (opt, p)]
    res = CliRunner().invoke(main, ["serve", "--rules", str(RULES), "--no-watch", *args])
    assert res.exit_code == 2, res.output
    assert f"{first} and {second} are both {port}" in res.output and "another process" not in res.output, res.output


@pytest.mark.parametrize(
    ("host", "metrics_host", "clash"),
    [
        ("127.0.0.1", "127.0.0.1", True),
        ("0.0.0.0", "127.0.0.1", True),  # the wildcard address covers the other
        ("127.0.0.1", "::", True),
        ("127.0.0.1", "127.0.0.2", False),  # one port on two addresses: allowed
    ],
)
def test_a_port_clash_needs_overlapping_addresses(host: str, metrics_host: str, clash: bool) -> None:
    settings = Settings(host=host, metrics_host=metrics_host, port=14318, metrics_port=14318)
    assert (port_clash(settings) is not None) is clash
    assert port_clash(Settings(host=host, metrics_host=metrics_host, port=0, metrics_port=0)) is None  # 0: any free


@pytest.mark.parametrize("option", ["--port", "--metrics-port", "--grpc-port"])
@pytest.mark.parametrize("port", ["70000", "-1"])
def test_ports_out_of_range_are_usage_errors(option: str, port: str) -> None:
    res = CliRunner().invoke(main, ["serve", "--rules", str(RULES), option, port])
    assert res.exit_code == 2, res.output
    assert f"Invalid value for '{option}'" in res.output and "0<=x<=65535" in res.output


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--grace", "5x", "invalid duration '5x'"),
        ("--grace", "2 sec", "with a unit: ms, s, m, h or d"),
        ("--turnless-timeout", "-1", "invalid duration '-1': use 0 or a positive number"),
        ("--windows", "5m,x", "invalid duration 'x'"),
        ("--windows", ",", "at least one rolling window"),
        ("--max-pending", "0", "x>=1"),
        ("--queue-spans", "0", "x>=1"),
        ("--max-body-bytes", "0", "size '0' is too small: at least 1B"),
        ("--max-decompressed-bytes", "64 MB/s", "invalid size '64 MB/s': use a number of bytes, or with a unit"),
        ("--max-pending-bytes", "-1GiB", "invalid size '-1GiB'"),
        ("--max-pending-bytes", "9" * 400, "too large: at most 1024TiB"),
        ("--verdict-log-max-bytes", "100", "size '100' is too small: at least 1KiB"),
        ("--verdict-log-max-bytes", "64Mb", None),  # units are read without regard to case: accepted
        ("--retry-after", "x", "invalid duration 'x'"),
        ("--retry-after", "0", "invalid duration '0': use a positive number"),
        ("--retry-after", "500ms", "a whole number of seconds"),
        ("--retry-after", "1.5s", "a whole number of seconds"),
        ("--retry-after", "6m", "at most 5m"),
        ("--retry-after", "9" * 400, "at most 5m"),  # float() of it is inf, which int() refuses
    ],
)
def test_bad_values_name_their_option(option: str, value: str, says: str | None) -> None:
    if says is None:  # a good value, beside the bad ones: parsed
        assert serve.make_context("serve", ["--rules", str(RULES), option, value]).params
        return
    res = CliRunner().invoke(main, ["serve", "--rules", str(RULES), option, value])
    assert res.exit_code == 2, res.output
    assert f"Invalid value for '{option}'" in res.output and says in res.output, res.output


@pytest.mark.parametrize(
    ("args", "env", "want"),
    [
        ([], {}, (512 << 20, 16 << 20, 64 << 20, 64 << 20)),  # the defaults, shown in --help as 512MiB, 16MiB, 64MiB
        (
            ["--max-pending-bytes", "1GiB", "--max-body-bytes", "4MB", "--max-decompressed-bytes", "1048576",
             "--verdict-log-max-bytes", "1.5 KiB"],
            {},
            (1 << 30, 4_000_000, 1 << 20, 1536),
        ),
        (
            [],
            {"TOOLWATCH_MAX_PENDING_BYTES": "2gib", "TOOLWATCH_MAX_BODY_BYTES": "8MiB",
             "TOOLWATCH_MAX_DECOMPRESSED_BYTES": "100kb", "TOOLWATCH_VERDICT_LOG_MAX_BYTES": "1TB"},
            (2 << 30, 8 << 20, 100_000, 10**12),
        ),
    ],
)
def test_sizes_take_units_from_the_options_and_the_environment(
    args: list[str], env: dict[str, str], want: tuple[int, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var, text in env.items():
        monkeypatch.setenv(var, text)
    found = [settings_from_options(serve.make_context("serve", ["--rules", str(RULES), *args]).params)]
    if env:  # the variables as the service reads them without the command line, too
        found.append(Settings.from_env(env))
    for s in found:
        assert (s.max_pending_bytes, s.max_body_bytes, s.max_decompressed_bytes, s.verdict_log_max_bytes) == want


def test_grace_and_turnless_timeout_take_0(monkeypatch: pytest.MonkeyPatch) -> None:
    # Settings allows 0 (judge at once); the options and their variables refused it ("use a positive number").
    ctx = serve.make_context("serve", ["--rules", str(RULES), "--grace", "0", "--turnless-timeout", "0ms"])
    settings = settings_from_options(ctx.params)
    assert settings.grace_s == 0 and settings.turnless_timeout_s == 0
    monkeypatch.setenv("TOOLWATCH_GRACE", "0s")
    monkeypatch.setenv("TOOLWATCH_TURNLESS_TIMEOUT", "0")
    settings = settings_from_options(serve.make_context("serve", ["--rules", str(RULES)]).params)
    assert settings.grace_s == 0 and settings.turnless_timeout_s == 0
    assert Settings.from_env().grace_s == 0 and Settings.from_env().turnless_timeout_s == 0
    # The windows stay positive.
    res = CliRunner().invoke(main, ["serve", "--rules", str(RULES), "--windows", "0"])
    assert res.exit_code == 2 and "invalid duration '0': use a positive number" in res.output, res.output


def test_help_shows_the_environment_variable_of_every_option() -> None:
    res = CliRunner().invoke(main, ["serve", "--help"], terminal_width=200)
    assert res.exit_code == 0
    options = [p for p in serve.params if isinstance(p, click.Option) and p.name != "help"]
    assert len(options) >= 20
    text = " ".join(res.output.split())  # as read: a long help wraps between "env" and "var"
    for opt in options:
        assert isinstance(opt.envvar, str) and opt.envvar.startswith("TOOLWATCH_"), opt.name
        assert f"env var: {opt.envvar}" in text, opt.name


def test_options_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    other = tmp_path / "other.yaml"
    other.write_text(RULES.read_text())
    monkeypatch.setenv("TOOLWATCH_RULES", f"{RULES}:{other}")
    monkeypatch.setenv("TOOLWATCH_AGENTS", "alpha, beta")  # comma-separated, as Settings.from_env reads it
    monkeypatch.setenv("TOOLWATCH_GRACE", "500ms")
    monkeypatch.setenv("TOOLWATCH_WINDOWS", "1m,1h")
    monkeypatch.setenv("TOOLWATCH_GRPC_PORT", "4317")
    ctx = serve.make_context("serve", ["--agent", "gamma"])
    settings = settings_from_options(ctx.params)
    assert settings.rules == (str(RULES), str(other))
    assert settings.agents == ("gamma",)  # the option wins over the variable
    ctx = serve.make_context("serve", [])
    settings = settings_from_options(ctx.params)
    assert settings.agents == ("alpha", "beta")
    assert settings.grace_s == 0.5 and settings.windows == (60.0, 3600.0) and settings.grpc_port == 4317


def test_help_names_every_content_coding_the_receiver_decodes() -> None:
    # zstd came after gzip and deflate; --help went on saying only those two were decoded and bounded.
    (limit,) = [p for p in serve.params if isinstance(p, click.Option) and p.name == "max_decompressed_bytes"]
    for coding in (GZIP, DEFLATE, ZSTD):
        assert coding in (serve.help or ""), coding
        assert coding in (limit.help or ""), coding


def test_retry_after_takes_whole_seconds_from_the_option_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    def parsed(*args: str) -> Settings:
        return settings_from_options(serve.make_context("serve", ["--rules", str(RULES), *args]).params)

    assert parsed().retry_after_s == 1
    assert parsed("--retry-after", "3").retry_after_s == 3
    assert parsed("--retry-after", "2m").retry_after_s == 120
    assert parsed("--retry-after", "5m").retry_after_s == 300
    monkeypatch.setenv("TOOLWATCH_RETRY_AFTER", "7s")
    assert parsed().retry_after_s == 7
    assert Settings.from_env().retry_after_s == 7
    assert parsed("--retry-after", "4s").retry_after_s == 4  # the option wins over the variable
    monkeypatch.setenv("TOOLWATCH_RETRY_AFTER", "250ms")
    res = CliRunner().invoke(main, ["serve", "--rules", str(RULES)])
    assert res.exit_code == 2 and "a whole number of seconds" in res.output, res.output
    assert Settings.from_env().retry_after_s == 1  # a bad variable: warned about, the default kept
    for bad in (0, 301):
        with pytest.raises(ValueError, match="retry_after_s"):
            Settings(retry_after_s=bad).validate()


def test_the_503_of_a_full_queue_carries_the_retry_after_option() -> None:
    import dataclasses

    from monitor.serve import ServerThread
    from tests.monitor.service.http_util import post
    from tests.monitor.service.test_bad_input import PB, good_pb

    args = ["--rules", str(RULES), "--no-watch", "--port", "0", "--metrics-port", "0", "--queue-spans", "2"]
    settings = settings_from_options(serve.make_context("serve", [*args, "--retry-after", "42s"]).params)
    st = ServerThread(dataclasses.replace(settings, poll_interval_s=0.02))
    server = st.start()
    try:
        server.pipeline.paused = True
        assert post(server.endpoint, good_pb(), PB)[0] == 200  # fills the queue (2 spans)
        status, _, headers = post(server.endpoint, good_pb(), PB)
        assert status == 503 and headers["Retry-After"] == "42"
    finally:
        server.pipeline.paused = False
        st.stop()
