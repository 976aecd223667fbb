"""deploy/k8s: both variants render with kustomize, match the Kubernetes API schemas, and
their probes, config and wiring fit answerbox."""

from __future__ import annotations

import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from answerbox.config import REPO_ROOT, Settings

K8S = REPO_ROOT / "deploy" / "k8s"
VARIANTS = ["base", "gpu"]
# The oldest Kubernetes release the manifests are written for (autoscaling/v2, policy/v1).
KUBERNETES_VERSION = "1.29"

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (for its built-in kustomize) is not installed")


@cache
def _rendered(variant: str) -> tuple[dict[str, Any], ...]:
    done = subprocess.run(["kubectl", "kustomize", str(K8S / variant)], capture_output=True, text=True, timeout=60, check=True)
    return tuple(yaml.safe_load_all(done.stdout))


def _one(variant: str, kind: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [doc for doc in _rendered(variant) if doc["kind"] == kind]
    assert len(found) == 1, f"{variant}: {len(found)} {kind} manifests"
    return found[0]


def _container(variant: str) -> dict[str, Any]:
    containers: list[dict[str, Any]] = _one(variant, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


@pytest.mark.parametrize("variant", VARIANTS)
def test_manifests_match_the_kubernetes_schemas(variant: str) -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate (test extra) carries the API schemas")
    kinds = []
    for doc in _rendered(variant):
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        kinds.append(doc["kind"])
    assert sorted(kinds) == ["ConfigMap", "Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget", "Service"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_service_hpa_and_pdb_point_at_the_deployment(variant: str) -> None:
    deployment = _one(variant, "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]

    def selects(selector: dict[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in selector.items())

    assert selects(_one(variant, "Service")["spec"]["selector"])
    assert selects(_one(variant, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"])
    target = _one(variant, "HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    port_names = {p["name"] for p in _container(variant)["ports"]}
    assert {p["targetPort"] for p in _one(variant, "Service")["spec"]["ports"]} <= port_names


def test_gpu_variant_runs_the_cuda_image_on_gpu_nodes_and_base_does_not() -> None:
    gpu_pod = _one("gpu", "Deployment")["spec"]["template"]["spec"]
    assert gpu_pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert _container("gpu")["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert _container("gpu")["image"].endswith(":cuda")
    base_pod = _one("base", "Deployment")["spec"]["template"]["spec"]
    assert "nodeSelector" not in base_pod and "nvidia.com/gpu" not in _container("base")["resources"]["limits"]
    assert _container("base")["image"].endswith(":cpu")


def test_configmap_is_valid_answerbox_settings(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(_one("base", "ConfigMap")["data"]["config.yaml"])
    settings = Settings.load(config)
    assert settings.host == "0.0.0.0" and settings.port == _container("base")["ports"][0]["containerPort"]
    mounts = {m["mountPath"] for m in _container("base")["volumeMounts"]}
    assert str(settings.opensearch.ca_certs).startswith(tuple(mounts))


def test_probe_paths_answer_on_a_running_answerbox(answerbox: str, client: httpx.Client) -> None:
    container = _container("base")
    paths = {container[probe]["httpGet"]["path"] for probe in ("startupProbe", "readinessProbe", "livenessProbe")}
    for path in paths:
        assert client.get(f"{answerbox}{path}").status_code == 200, path
