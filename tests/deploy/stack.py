"""Real Prometheus and Alertmanager processes on 127.0.0.1 ephemeral ports, configured from deploy/."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.binaries import DEPLOY, binary


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


def wait_http(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{log.stem} exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=1.0) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url} not ready after {timeout:.0f}s:\n{log.read_text()[-3000:]}")


class Process:
    """One child process we started; `stop()` ends exactly it (terminate, then kill after a timeout)."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.log = log
        self._out = log.open("wb")
        self.proc = subprocess.Popen(args, stdout=self._out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._out.close()


class Alertmanager(Process):
    def __init__(self, workdir: Path, webhook_url: str) -> None:
        """The shipped alertmanager.yml, every receiver pointed at `webhook_url`, with test-short timings."""
        config: dict[str, Any] = yaml.safe_load((DEPLOY / "alertmanager" / "alertmanager.yml").read_text())
        for receiver in config["receivers"]:
            for hook in receiver.get("webhook_configs", []):
                hook["url"] = webhook_url + "/" + receiver["name"]
        for route in [config["route"], *config["route"].get("routes", [])]:
            route.update(group_wait="1s", group_interval="1s")
        path = workdir / "alertmanager.yml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        (workdir / "am-data").mkdir()
        super().__init__(
            [
                binary("alertmanager", "prometheus-alertmanager"),
                f"--config.file={path}",
                f"--storage.path={workdir / 'am-data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--cluster.listen-address=",
            ],
            workdir / "alertmanager.log",
        )
        wait_http(self.url + "/-/ready", self.proc, self.log)

    def alerts(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = get_json(self.url + "/api/v2/alerts")
        return result


RENDERED_RULES = "toolwatch-rules.yml"  # rendered from the rule files: each test renders its own


class Prometheus(Process):
    def __init__(self, workdir: Path, rules: Path, target: str, alertmanager: str, interval: str = "1s") -> None:
        """The shipped prometheus.yml: scraping `target` only, evaluating `rules` in place of the rendered
        toolwatch-rules.yml and its other rule files as shipped (the health alerts), alerting `alertmanager`."""
        config: dict[str, Any] = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
        config["global"].update(scrape_interval=interval, evaluation_interval=interval)
        config["rule_files"] = [
            str(rules) if name == RENDERED_RULES else str(DEPLOY / "prometheus" / name) for name in config["rule_files"]
        ]
        assert str(rules) in config["rule_files"], f"the shipped prometheus.yml does not load {RENDERED_RULES}"
        config["alerting"]["alertmanagers"][0]["static_configs"] = [{"targets": [alertmanager]}]
        job = next(j for j in config["scrape_configs"] if j["job_name"] == "toolwatch")
        job.pop("dns_sd_configs")
        job["static_configs"] = [{"targets": [target]}]
        config["scrape_configs"] = [job]
        path = workdir / "prometheus.yml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        super().__init__(
            [
                binary("prometheus"),
                f"--config.file={path}",
                f"--storage.tsdb.path={workdir / 'prom-data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--rules.alert.resend-delay=1s",
            ],
            workdir / "prometheus.log",
        )
        wait_http(self.url + "/-/ready", self.proc, self.log)

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Run an instant query; raises AssertionError with Prometheus' message when it fails."""
        url = self.url + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            doc = get_json(url)
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"query failed ({exc.code}): {exc.read().decode()[:500]}\n{expr}") from None
        assert doc["status"] == "success", doc
        result: list[dict[str, Any]] = doc["data"]["result"]
        return result

    def alerts(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = get_json(self.url + "/api/v1/alerts")["data"]["alerts"]
        return result
