# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""deploy/ and .devcontainer/ hold together: the manifests parse, their
ports, probes, volumes and selectors refer to each other, the Dockerfile
copies paths that exist, and the dev container sets up what `make test`
needs. (No image is built here: that needs registry access.)"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"


def manifests() -> dict[str, dict[str, Any]]:
    """kind -> the one object of that kind in deploy/k8s."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            assert doc["kind"] not in out, f"two {doc['kind']} objects"
            out[doc["kind"]] = doc
    return out


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_kustomization_lists_every_manifest() -> None:
    objs = manifests()
    kust = objs.pop("Kustomization")
    assert sorted(kust["resources"]) == sorted(
        p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml"
    )
    assert set(objs) == {"Deployment", "Service", "PersistentVolumeClaim"}


def test_deployment_probes_ports_and_volumes() -> None:
    objs = manifests()
    dep = objs["Deployment"]
    assert dep["spec"]["replicas"] >= 2
    pod = dep["spec"]["template"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    (container,) = pod["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": 8000, "grpc": 8001, "metrics": 8002}
    ready = container["readinessProbe"]["httpGet"]
    live = container["livenessProbe"]["httpGet"]
    assert ready["path"] == "/v2/health/ready" and live["path"] == "/v2/health/live"
    for probe in (ready, live, container["startupProbe"]["httpGet"]):
        assert probe["port"] == "http"
    # The repository: a volume from the PVC, mounted where the server looks.
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    (mount,) = container["volumeMounts"]
    assert mount["name"] in volumes
    claim = volumes[mount["name"]]["persistentVolumeClaim"]["claimName"]
    assert claim == objs["PersistentVolumeClaim"]["metadata"]["name"]
    repo = [a.split("=", 1)[1] for a in container["args"] if a.startswith("--model-repository=")]
    assert repo == [mount["mountPath"]]
    # No /dev/shm volume: tritonpy's shared memory is memfd (docs/deploy.md).
    assert not any(m.get("mountPath") == "/dev/shm" for m in container["volumeMounts"])


def test_service_reaches_the_pods() -> None:
    objs = manifests()
    svc, dep = objs["Service"], objs["Deployment"]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for p in svc["spec"]["ports"]:
        assert p["targetPort"] in ports and p["port"] == ports[p["targetPort"]]


def test_dockerfile_base_copies_and_ports() -> None:
    instructions = dockerfile_instructions()
    args = dict(rest.split("=", 1) for word, rest in instructions if word == "ARG" and "=" in rest)
    assert args["BASE_IMAGE"] == "nvcr.io/nvidia/tritonserver:24.10-py3"  # Triton 2.51
    stages = [rest for word, rest in instructions if word == "FROM"]
    assert stages and all(f.split()[0] == "${BASE_IMAGE}" for f in stages)
    copied = []
    for word, rest in instructions:
        if word == "COPY" and "--from=" not in rest:
            copied += shlex.split(rest)[:-1]
    assert "backend" in copied and "setup.py" in copied
    missing = [p for p in copied if not (ROOT / p).exists()]
    assert not missing, f"deploy/Dockerfile copies paths missing from the repository: {missing}"
    # The package root setup.py builds from is copied into the build stage.
    setup = (ROOT / "setup.py").read_text()
    sources = re.findall(r'package_dir=\{"": "(\w+)"\}', setup)
    assert sources == ["src"] and "src" in copied
    exposed = {int(p) for word, rest in instructions if word == "EXPOSE" for p in rest.split()}
    assert exposed == {8000, 8001, 8002}
    runs = " ".join(rest for word, rest in instructions if word == "RUN")
    assert "tritonpy install /opt/tritonserver/backends" in runs


def test_devcontainer_matches_make_test() -> None:
    dev = json.loads((ROOT / ".devcontainer" / "devcontainer.json").read_text())
    assert "python:1-3.11" in dev["image"]  # the Python `make test` runs on
    assert dev["postCreateCommand"] == "make setup"
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^setup:", makefile, re.M)
    for tool in ("cmake", "g++", "make"):
        assert tool in dev["onCreateCommand"].split()
    assert set(dev["forwardPorts"]) == {8000, 8001, 8002}
    settings = dev["customizations"]["vscode"]["settings"]
    for value in settings.values():
        path = value.replace("${containerWorkspaceFolder}/", "")
        # .venv/bin/... appear after `make setup`; the tools are set up by it.
        tool = Path(path).name
        assert tool in ("python", "clang-format")
        assert tool == "python" or f'"{tool}' in makefile
