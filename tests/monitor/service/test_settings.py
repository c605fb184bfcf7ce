"""Settings from the environment: documented variables, bad values fall back with a warning."""

from __future__ import annotations

import logging

import pytest

from monitor.serve import Settings


def test_from_env_reads_every_kind_of_value() -> None:
    s = Settings.from_env(
        {
            "TOOLWATCH_RULES": "a.yaml:b.yaml",
            "TOOLWATCH_PORT": "5318",
            "TOOLWATCH_GRPC_PORT": "5317",
            "TOOLWATCH_GRACE": "500ms",
            "TOOLWATCH_WINDOWS": "1m, 15m,1h",
            "TOOLWATCH_AGENTS": "a, b",
            "TOOLWATCH_VERDICT_LOG_ALL": "yes",
            "TOOLWATCH_WATCH_RULES": "off",
            "TOOLWATCH_TOKEN": "t",
        }
    )
    assert s.rules == ("a.yaml", "b.yaml") and s.port == 5318 and s.grpc_port == 5317
    assert s.grace_s == 0.5 and s.windows == (60.0, 900.0, 3600.0) and s.agents == ("a", "b")
    assert s.verdict_log_all is True and s.watch_rules is False and s.token == "t"


def test_bad_values_warn_and_keep_defaults(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        s = Settings.from_env({"TOOLWATCH_PORT": "http", "TOOLWATCH_GRACE": "soon"}, metrics_port=1234)
    assert s.port == 4318 and s.grace_s == 2.0 and s.metrics_port == 1234
    assert "TOOLWATCH_PORT" in caplog.text and "TOOLWATCH_GRACE" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        s = Settings.from_env({"TOOLWATCH_METRICS_PORT": "70000", "TOOLWATCH_GRPC_PORT": "-1"})
    assert s.metrics_port == 9464 and s.grpc_port is None
    assert "TOOLWATCH_METRICS_PORT" in caplog.text and "TOOLWATCH_GRPC_PORT" in caplog.text
    # A size under its option's minimum is bad as a size that is 0 is: a warning and the default, not a refusal.
    for small in ("0", "100", "1023B"):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            s = Settings.from_env({"TOOLWATCH_VERDICT_LOG_MAX_BYTES": small})
        assert s.verdict_log_max_bytes == 64 << 20
        assert "TOOLWATCH_VERDICT_LOG_MAX_BYTES" in caplog.text and "at least 1KiB" in caplog.text


def test_invalid_combinations_are_refused() -> None:
    with pytest.raises(ValueError, match="queue_spans"):
        Settings.from_env({}, queue_spans=0)
    with pytest.raises(ValueError, match="port must be 0-65535"):
        Settings.from_env({}, port=70000)
    with pytest.raises(ValueError, match="verdict_log_max_bytes"):
        Settings.from_env({}, verdict_log_max_bytes=100)
    with pytest.raises(TypeError, match="unknown settings"):
        Settings.from_env({}, colour="blue")
    # `__other__` is the label of every agent outside the configuration: naming it would merge the two.
    with pytest.raises(ValueError, match="agent name '__other__' is reserved"):
        Settings.from_env({"TOOLWATCH_AGENTS": "a, __other__"})
    with pytest.raises(ValueError, match="agent name '__other__' is reserved"):
        Settings(agents=("__other__",)).validate()


def test_two_listeners_on_one_port_are_refused_by_validate() -> None:
    # The clash was checked apart (serve, demo and Server.start each called port_clash); validate() is the one home.
    with pytest.raises(ValueError, match="--port and --metrics-port are both 14318"):
        Settings(port=14318, metrics_port=14318).validate()
    with pytest.raises(ValueError, match="--port and --grpc-port are both 14317"):
        Settings.from_env({"TOOLWATCH_PORT": "14317", "TOOLWATCH_GRPC_PORT": "14317"})
    Settings(host="127.0.0.1", metrics_host="127.0.0.2", port=14318, metrics_port=14318).validate()  # two addresses
    Settings(port=0, metrics_port=0, grpc_port=0).validate()  # 0: any free port, each its own
