"""Deployment files: docker-compose.yml against the Compose Specification schema, the Kubernetes manifests
against the Kubernetes OpenAPI schemas (kubernetes-validate), and the cross-references between them."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from tests.deploy.binaries import DEPLOY, ROOT, binary
from tests.deploy.stack import Process, free_port, wait_http

K8S = DEPLOY / "k8s"
K8S_VERSION = "1.30.0"
COMPOSE = DEPLOY / "docker-compose.yml"


def _check_jsonschema(*args: str | Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


def test_compose_file_matches_the_compose_spec(tmp_path: Path) -> None:
    result = _check_jsonschema(COMPOSE)
    assert result.returncode == 0, result.stdout + result.stderr
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(COMPOSE.read_text().replace("services:\n", "servics:\n", 1))
    assert _check_jsonschema(broken).returncode != 0  # the validator does reject a broken file


def test_compose_wiring() -> None:
    doc = yaml.safe_load(COMPOSE.read_text())
    services = doc["services"]
    assert {"monitor", "redis", "otel-collector", "prometheus", "alertmanager", "grafana"} <= set(services)
    for name, svc in services.items():
        for mount in svc.get("volumes", []):
            source = mount.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), f"{name}: {source} does not exist"
        for dep in svc.get("depends_on", []):
            assert dep in services, f"{name} depends on unknown {dep}"
    monitor = services["monitor"]
    assert monitor["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    assert monitor["deploy"]["replicas"] >= 2
    rules = monitor["command"][monitor["command"].index("--rules") + 1]
    assert (ROOT / "rules" / Path(rules).name).exists()
    prom = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    job = next(j for j in prom["scrape_configs"] if j["job_name"] == "toolwatch")
    assert job["dns_sd_configs"][0]["names"] == ["monitor"]  # the service name resolves to every replica
    collector = services["otel-collector"]
    assert collector["environment"]["TOOLWATCH_MONITORS"] == "monitor"
    # the capture volume is handed to the Collector's user (10001; its image has no filesystem) before it starts
    capture = next(m.split(":")[1] for m in collector["volumes"] if m.startswith("capture:"))
    exporter = yaml.safe_load((DEPLOY / "otel-collector" / "config.yaml").read_text())["exporters"]["file/capture"]
    assert exporter["path"].startswith(capture + "/")
    init = services["capture-init"]
    assert collector["depends_on"]["capture-init"] == {"condition": "service_completed_successfully"}
    chown, owner, target = init["command"]
    assert (chown, owner) == ("chown", "10001:10001") and f"capture:{target}" in init["volumes"]
    # the Collector's loadbalancing exporter sends OTLP/gRPC to the port the monitors listen on
    lb = yaml.safe_load((DEPLOY / "otel-collector" / "config.yaml").read_text())["exporters"]["loadbalancing"]
    assert monitor["environment"]["TOOLWATCH_GRPC_PORT"] == lb["resolver"]["dns"]["port"]
    am = yaml.safe_load((DEPLOY / "alertmanager" / "alertmanager.yml").read_text())
    for receiver in am["receivers"]:
        for hook in receiver.get("webhook_configs", []):
            host = re.match(r"http://([^:/]+)", hook["url"])
            assert host and host.group(1) in services, hook["url"]


def test_every_shipped_rule_file_is_loaded_everywhere() -> None:
    """Both rule files (the rendered accuracy alerts and the hand-written health alerts) are in the shipped
    prometheus.yml, which Compose mounts with its folder, and in the ConfigMap Kubernetes users load."""
    shipped = sorted(p.name for p in (DEPLOY / "prometheus").glob("*.yml") if p.name != "prometheus.yml")
    assert shipped == ["toolwatch-health.yml", "toolwatch-rules.yml"]
    prom = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    assert sorted(prom["rule_files"]) == shipped
    compose = yaml.safe_load(COMPOSE.read_text())["services"]["prometheus"]
    assert "./prometheus:/etc/prometheus:ro" in compose["volumes"]  # the rule files beside prometheus.yml
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    rules = next(g for g in kustomization["configMapGenerator"] if g["name"] == "toolwatch-prometheus-rules")
    assert sorted(Path(f).name for f in rules["files"]) == shipped


def test_shipped_prometheus_and_alertmanager_configs_are_valid() -> None:
    prom = subprocess.run(
        [binary("promtool"), "check", "config", str(DEPLOY / "prometheus" / "prometheus.yml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert prom.returncode == 0, prom.stdout + prom.stderr
    am = subprocess.run(
        [binary("amtool"), "check-config", str(DEPLOY / "alertmanager" / "alertmanager.yml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert am.returncode == 0, am.stdout + am.stderr


def _k8s_docs() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    docs: list[dict[str, Any]] = []
    for resource in kustomization["resources"]:
        docs.extend(d for d in yaml.safe_load_all((K8S / resource).read_text()) if d)
    generated = [
        (g["name"], {Path(f).name: (K8S / f).read_text() for f in g["files"]})
        for g in kustomization["configMapGenerator"]
    ]  # what `kubectl apply -k` generates
    # and what the documented `kubectl create configmap toolwatch-rules --from-file=rules/` makes
    generated.append(("toolwatch-rules", {p.name: p.read_text() for p in sorted((ROOT / "rules").glob("*.yaml"))}))
    for name, data in generated:
        meta = {"name": name, "namespace": kustomization["namespace"]}
        docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data})
    return docs


@pytest.mark.parametrize("doc", _k8s_docs(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_k8s_manifest_matches_the_kubernetes_schema(doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_k8s_validator_rejects_a_broken_manifest() -> None:
    doc = next(d for d in _k8s_docs() if d["kind"] == "Deployment")
    broken = yaml.safe_load(yaml.safe_dump(doc))
    broken["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "4318"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def test_k8s_cross_references() -> None:
    docs = _k8s_docs()
    configmaps = {d["metadata"]["name"] for d in docs if d["kind"] == "ConfigMap"}
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    named_ports: dict[str, set[str]] = {}
    for dep in deployments:
        spec = dep["spec"]
        labels = spec["template"]["metadata"]["labels"]
        assert spec["selector"]["matchLabels"].items() <= labels.items()
        for vol in spec["template"]["spec"]["volumes"]:
            if "configMap" in vol:
                assert vol["configMap"]["name"] in configmaps, vol
        ports = {p["name"] for c in spec["template"]["spec"]["containers"] for p in c.get("ports", [])}
        named_ports[labels["app.kubernetes.io/name"]] = ports
    for svc in (d for d in docs if d["kind"] == "Service"):
        ports = named_ports[svc["spec"]["selector"]["app.kubernetes.io/name"]]
        for port in svc["spec"]["ports"]:
            assert port["targetPort"] in ports, (svc["metadata"]["name"], port)
    collector = next(d for d in deployments if d["metadata"]["name"] == "toolwatch-collector")
    env = {e["name"]: e["value"] for e in collector["spec"]["template"]["spec"]["containers"][0]["env"]}
    headless = next(d for d in docs if d["kind"] == "Service" and d["spec"].get("clusterIP") == "None")
    assert env["TOOLWATCH_MONITORS"].startswith(headless["metadata"]["name"] + ".toolwatch.svc")
    assert headless["spec"]["ports"][0]["port"] == 4317
    monitor = next(d for d in deployments if d["metadata"]["name"] == "toolwatch-monitor")
    menv = {e["name"]: e["value"] for e in monitor["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert menv["TOOLWATCH_GRPC_PORT"] == "4317"


@pytest.mark.parametrize(
    ("copy", "original"),
    [
        ("configs/config.yaml", DEPLOY / "otel-collector" / "config.yaml"),
        ("configs/toolwatch-rules.yml", DEPLOY / "prometheus" / "toolwatch-rules.yml"),
        ("configs/toolwatch-health.yml", DEPLOY / "prometheus" / "toolwatch-health.yml"),
    ],
)
def test_k8s_config_copies_equal_the_originals(copy: str, original: Path) -> None:
    assert (K8S / copy).read_text() == original.read_text(), (
        f"deploy/k8s/{copy} is stale: cp {original.relative_to(ROOT)} deploy/k8s/{copy}"
    )


def test_collector_config_is_consistent() -> None:
    doc = yaml.safe_load((DEPLOY / "otel-collector" / "config.yaml").read_text())
    pipelines = doc["service"]["pipelines"]
    for kind in ("receivers", "processors", "exporters"):
        for pipeline in pipelines.values():
            for component in pipeline.get(kind, []):
                assert component in doc[kind], f"pipeline uses undefined {kind[:-1]} {component}"
    for ext in doc["service"].get("extensions", []):
        assert ext in doc["extensions"]
    lb = doc["exporters"]["loadbalancing"]
    assert lb["routing_key"] == "traceID" and "otlp" in lb["protocol"]
    assert lb["resolver"]["dns"]["hostname"] == "${env:TOOLWATCH_MONITORS}"
    assert doc["exporters"]["file/capture"]["format"] == "json"  # OTLP JSON lines, what replay reads
    assert pipelines["traces"]["exporters"] == ["loadbalancing", "file/capture"]


def test_dockerfile_builds_the_monitor_image() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    lines = [ln for ln in text.replace("\\\n", " ").splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    instructions = [ln.split()[0] for ln in lines]
    assert instructions.count("FROM") == 2 and instructions[-2:] == ["ENTRYPOINT", "CMD"]
    for ln in lines:
        if ln.startswith("COPY") and "--from" not in ln:
            for source in ln.split()[1:-1]:
                assert (ROOT / source).exists(), f"COPY source {source} missing"
    user = next(ln for ln in lines if ln.startswith("USER")).split()[1]
    assert user not in ("root", "0")
    assert set(next(ln for ln in lines if ln.startswith("EXPOSE")).split()[1:]) == {"4317", "4318", "9464"}
    assert 'ENTRYPOINT ["toolwatch"]' in lines and 'CMD ["serve"]' in lines
    assert "TOOLWATCH_RULES=/etc/toolwatch/rules/incident-triage.yaml" in text
    # The image carries the C decoders: the build stage has a compiler and the install is checked.
    build = text.split("\nFROM ")[1]  # the build stage
    assert "gcc" in build and "setup.py" in build
    assert "accelerated()" in text


def test_compose_publishes_ports_on_the_loopback_only() -> None:
    """Nothing in the stack authenticates: Prometheus runs with --web.enable-lifecycle (POST /-/quit stops it),
    Alertmanager takes silences from anyone, Grafana lets anonymous viewers in, the OTLP receivers take any span (which
    moves the accuracy figures). Published on every interface (`"9090:9090"`), they are open to the whole network."""
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    published = {name: svc["ports"] for name, svc in services.items() if svc.get("ports")}
    assert published, "the stack publishes its UIs and OTLP receivers"
    for name, ports in published.items():
        for port in ports:
            mapping = port if isinstance(port, str) else f"{port.get('host_ip', '')}:{port.get('published')}"
            assert mapping.startswith("127.0.0.1:"), f"{name} publishes {port!r} on every interface"


def _real(service: str, port: int, work: Path) -> list[str]:
    """The compose service's real binary with its compose flags, on 127.0.0.1:`port`, paths under `work`."""
    if service == "prometheus":
        return [binary("prometheus"), f"--config.file={DEPLOY / 'prometheus' / 'prometheus.yml'}",
                f"--storage.tsdb.path={work}", f"--web.listen-address=127.0.0.1:{port}"]  # fmt: skip
    return [binary("alertmanager", "prometheus-alertmanager"),
            f"--config.file={DEPLOY / 'alertmanager' / 'alertmanager.yml'}", f"--storage.path={work}",
            f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="]  # fmt: skip


def test_compose_services_have_healthchecks_and_wait_for_health() -> None:
    """`docker compose ps` says whether each service serves; the services that need another wait until it does."""
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    # The monitor's is the image's (Dockerfile HEALTHCHECK); the Collector's image has no shell nor wget (FROM
    # scratch), so its health_check extension is for orchestrators that probe from outside (the k8s manifests).
    assert "HEALTHCHECK" in (DEPLOY / "Dockerfile").read_text()
    for name in ("prometheus", "alertmanager", "grafana", "redis"):
        check = services[name].get("healthcheck", {})
        assert check.get("test", [""])[0] == "CMD" and check.get("interval"), f"{name} has no healthcheck"
    assert services["otel-collector"]["depends_on"]["monitor"] == {"condition": "service_healthy"}
    assert services["prometheus"]["depends_on"]["alertmanager"] == {"condition": "service_healthy"}
    assert services["grafana"]["depends_on"]["prometheus"] == {"condition": "service_healthy"}


@pytest.mark.parametrize("service", ["prometheus", "alertmanager"])
def test_compose_healthcheck_url_answers_on_the_real_binary(service: str, tmp_path: Path) -> None:
    """The URL the healthcheck asks for, asked of the real binary started with the shipped config."""
    compose = yaml.safe_load(COMPOSE.read_text())["services"][service]
    test = compose["healthcheck"]["test"]
    assert test[1:4] == ["wget", "-q", "--spider"], test
    url = urllib.parse.urlsplit(test[4])
    assert url.hostname == "127.0.0.1" and url.port is not None, test
    port = free_port()
    proc = Process(_real(service, port, tmp_path), tmp_path / f"{service}.log")
    try:
        wait_http(f"http://127.0.0.1:{port}{url.path}", proc.proc, proc.log)
    finally:
        proc.stop()
    # ... at the port the container listens on: compose sets no --web.listen-address, so the binary's default.
    assert not any(flag.startswith("--web.listen-address") for flag in compose["command"]), compose["command"]
    assert url.port == {"prometheus": 9090, "alertmanager": 9093}[service]
