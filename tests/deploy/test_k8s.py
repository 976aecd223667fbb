"""deploy/k8s: both variants render with kustomize, match the Kubernetes API schemas, and
their probes, config and wiring fit answerbox; their NetworkPolicies let answerbox, its
callers, Prometheus, OpenSearch, the LLM and DNS talk as deploy/ADMIN.md says, and nothing
else; no pod holds a service-account token."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from functools import cache
from ipaddress import ip_address, ip_network
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import yaml
from answerbox.core.config import Settings

from tests.support.repo import REPO_ROOT

K8S = REPO_ROOT / "deploy" / "k8s"
VARIANTS = ["base", "gpu"]
# The oldest Kubernetes release the manifests are written for (autoscaling/v2, policy/v1).
KUBERNETES_VERSION = "1.29"

pytestmark = pytest.mark.skipif(
    shutil.which("kubectl") is None, reason="kubectl (for its built-in kustomize) is not installed"
)


@cache
def _rendered(variant: str) -> tuple[dict[str, Any], ...]:
    done = subprocess.run(
        ["kubectl", "kustomize", str(K8S / variant)], capture_output=True, text=True, timeout=60, check=True
    )
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
    kubernetes_validate = pytest.importorskip(
        "kubernetes_validate", reason="kubernetes-validate (test extra) carries the API schemas"
    )
    kinds = []
    for doc in _rendered(variant):
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        kinds.append(doc["kind"])
    assert sorted(kinds) == [
        "ConfigMap",
        "Deployment",
        "HorizontalPodAutoscaler",
        "NetworkPolicy",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "Service",
    ]


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
    assert "nodeSelector" not in base_pod
    assert "nvidia.com/gpu" not in _container("base")["resources"]["limits"]
    assert _container("base")["image"].endswith(":cpu")


def test_configmap_is_valid_answerbox_settings(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(_one("base", "ConfigMap")["data"]["config.yaml"])
    settings = Settings.load(config)
    assert settings.host == "0.0.0.0"
    assert settings.port == _container("base")["ports"][0]["containerPort"]
    mounts = {m["mountPath"] for m in _container("base")["volumeMounts"]}
    assert str(settings.opensearch.ca_certs).startswith(tuple(mounts))


def test_probe_paths_answer_on_a_running_answerbox(answerbox: str, client: httpx.Client) -> None:
    container = _container("base")
    paths = {container[probe]["httpGet"]["path"] for probe in ("startupProbe", "readinessProbe", "livenessProbe")}
    for path in paths:
        assert client.get(f"{answerbox}{path}").status_code == 200, path


@pytest.mark.parametrize("variant", VARIANTS)
def test_no_pod_mounts_a_service_account_token(variant: str) -> None:
    """answerbox never calls the Kubernetes API, so a stolen pod holds no token for it."""
    pods = [doc["spec"]["template"]["spec"] for doc in _rendered(variant) if "template" in doc.get("spec", {})]
    assert pods
    assert all(pod.get("automountServiceAccountToken") is False for pod in pods)
    assert not [
        doc
        for doc in _rendered(variant)
        if doc["kind"] == "ServiceAccount" and doc.get("automountServiceAccountToken") is not False
    ]


# Who may reach what: NetworkPolicy's rules, for the peers and ports these manifests use.

NAMESPACE = "answerbox"  # wherever the manifests are applied: they name none


@dataclass
class Pod:
    """A pod as a NetworkPolicy sees it: its labels, its namespace and its named ports."""

    labels: dict[str, str]
    namespace: str = NAMESPACE
    ports: dict[str, int] = field(default_factory=dict)


# An address outside the cluster (a str) is matched by ipBlock peers only.
Peer = Pod | str

# The OpenSearch Helm chart's pod labels (opensearch-cluster-master, config.yaml's host), the
# labels ADMIN.md asks of the LLM's pods, the cluster DNS's, and others that must be told apart.
OPENSEARCH = Pod(
    {"app.kubernetes.io/name": "opensearch", "app.kubernetes.io/instance": "opensearch"},
    ports={"http": 9200, "transport": 9300},
)
LLM = Pod({"app.kubernetes.io/name": "llm"})
DNS = Pod({"k8s-app": "kube-dns"}, namespace="kube-system")
NEIGHBOUR = Pod({"app.kubernetes.io/name": "shop"})
STRANGER = Pod({"app.kubernetes.io/name": "shop"}, namespace="elsewhere")
PROMETHEUS = Pod({"app.kubernetes.io/name": "prometheus", "prometheus": "k8s"}, namespace="monitoring")
INGRESS_NGINX = Pod({"app.kubernetes.io/name": "ingress-nginx"}, namespace="ingress-nginx")


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A label selector (matchLabels, matchExpressions); the empty one selects everything."""
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, values = expression["key"], expression.get("values", [])
        held = {
            "In": labels.get(key) in values,
            "NotIn": labels.get(key) not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }
        if not held[expression["operator"]]:
            return False
    return True


def _peer_matches(peer: dict[str, Any], other: Peer) -> bool:
    if isinstance(other, str):
        block: dict[str, Any] = peer.get("ipBlock") or {}
        return (
            bool(block)
            and ip_address(other) in ip_network(block["cidr"])
            and not any(ip_address(other) in ip_network(c) for c in block.get("except", []))
        )
    if "ipBlock" in peer:
        return False
    if "namespaceSelector" in peer:
        in_namespace = _selects(peer["namespaceSelector"], {"kubernetes.io/metadata.name": other.namespace})
    else:
        in_namespace = other.namespace == NAMESPACE
    return in_namespace and _selects(peer.get("podSelector", {}), other.labels)


def _port_matches(ports: list[dict[str, Any]] | None, port: int, protocol: str, destination: Peer) -> bool:
    """A rule's ports; a named port is the destination pod's."""
    named = destination.ports if isinstance(destination, Pod) else {}
    for entry in ports or [{"protocol": protocol}]:
        wanted = entry.get("port")
        number = named.get(wanted) if isinstance(wanted, str) else wanted
        if entry.get("protocol", "TCP") == protocol and (
            wanted is None or (number is not None and number <= port <= entry.get("endPort", number))
        ):
            return True
    return False


def _allowed(
    docs: tuple[dict[str, Any], ...], source: Pod, destination: Peer, port: int, protocol: str = "TCP"
) -> bool:
    """Whether the NetworkPolicies among ``docs`` let ``source`` connect to ``destination``'s
    port: the source's egress and the destination's ingress must both allow it. A pod that no
    policy selects for a direction is not isolated in that direction."""
    policies = [doc["spec"] for doc in docs if doc["kind"] == "NetworkPolicy"]

    def permits(direction: str, pod: Pod, peer: Peer) -> bool:
        applying = [
            spec
            for spec in policies
            if pod.namespace == NAMESPACE
            and direction in spec.get("policyTypes", ["Ingress", *(["Egress"] if "egress" in spec else [])])
            and _selects(spec["podSelector"], pod.labels)
        ]
        side = "from" if direction == "Ingress" else "to"
        return not applying or any(
            (not rule.get(side) or any(_peer_matches(p, peer) for p in rule[side]))
            and _port_matches(rule.get("ports"), port, protocol, destination)
            for spec in applying
            for rule in spec.get(direction.lower(), [])
        )

    return permits("Egress", source, destination) and (
        isinstance(destination, str) or permits("Ingress", destination, source)
    )


def _answerbox_pod(variant: str) -> Pod:
    labels = _one(variant, "Deployment")["spec"]["template"]["metadata"]["labels"]
    return Pod(labels, ports={p["name"]: p["containerPort"] for p in _container(variant)["ports"]})


def _configured(variant: str, folder: Path) -> Settings:
    folder.mkdir(exist_ok=True)
    config = folder / "config.yaml"
    config.write_text(_one(variant, "ConfigMap")["data"]["config.yaml"])
    return Settings.load(config)


@pytest.mark.parametrize("variant", VARIANTS)
def test_answerbox_port_is_open_to_its_namespace_and_prometheus_only(variant: str) -> None:
    docs, answerbox = _rendered(variant), _answerbox_pod(variant)
    [port] = answerbox.ports.values()
    assert _allowed(docs, NEIGHBOUR, answerbox, port)  # callers (and an Ingress controller) in its namespace
    assert _allowed(docs, PROMETHEUS, answerbox, port)  # scrapes /metrics on the same port
    assert not _allowed(docs, STRANGER, answerbox, port)
    assert not _allowed(docs, INGRESS_NGINX, answerbox, port)  # until the admin adds it (ADMIN.md)
    assert not _allowed(docs, NEIGHBOUR, answerbox, port + 1)
    assert not _allowed(docs, NEIGHBOUR, answerbox, port, "UDP")


@pytest.mark.parametrize("variant", VARIANTS)
def test_answerbox_reaches_opensearch_the_llm_and_dns_and_nothing_else(variant: str, tmp_path: Path) -> None:
    docs, answerbox, settings = _rendered(variant), _answerbox_pod(variant), _configured(variant, tmp_path)
    opensearch, llm = urlsplit(settings.opensearch.url), urlsplit(settings.llm.base_url)
    # Short names: Services in answerbox's own namespace, where its egress rules look.
    assert "." not in str(opensearch.hostname)
    assert "." not in str(llm.hostname)
    assert opensearch.port
    assert llm.port
    assert _allowed(docs, answerbox, OPENSEARCH, opensearch.port)
    assert _allowed(docs, answerbox, LLM, llm.port)
    assert _allowed(docs, answerbox, DNS, 53, "UDP")
    assert _allowed(docs, answerbox, DNS, 53, "TCP")
    assert not _allowed(docs, answerbox, OPENSEARCH, OPENSEARCH.ports["transport"])
    assert not _allowed(docs, answerbox, Pod(OPENSEARCH.labels, namespace="elsewhere"), opensearch.port)
    assert not _allowed(docs, answerbox, LLM, opensearch.port)
    assert not _allowed(docs, answerbox, NEIGHBOUR, 80)
    assert not _allowed(docs, answerbox, Pod({}, namespace="kube-system"), 53, "UDP")  # only the DNS pods there
    assert not _allowed(docs, answerbox, "203.0.113.7", 443)  # the internet
    assert not _allowed(docs, answerbox, "10.96.0.10", 53, "UDP")  # an address, not the DNS pods
    assert not _allowed(docs, answerbox, "169.254.169.254", 80)  # a cloud's metadata service


@pytest.mark.parametrize("variant", VARIANTS)
def test_only_answerbox_reaches_the_llm(variant: str, tmp_path: Path) -> None:
    docs, answerbox = _rendered(variant), _answerbox_pod(variant)
    port = urlsplit(_configured(variant, tmp_path).llm.base_url).port or 80
    assert _allowed(docs, answerbox, LLM, port)
    for other in (NEIGHBOUR, STRANGER, PROMETHEUS, Pod(answerbox.labels, namespace="elsewhere")):
        assert not _allowed(docs, other, LLM, port), other


_YAML_BLOCK = re.compile(r"^```yaml\n(.*?)^```", re.MULTILINE | re.DOTALL)


@pytest.mark.parametrize("variant", VARIANTS)
def test_admin_guide_overlay_lets_an_ingress_controller_in(variant: str, tmp_path: Path) -> None:
    """deploy/ADMIN.md's overlay for an Ingress controller in a namespace of its own."""
    [overlay] = [
        block
        for block in _YAML_BLOCK.findall((REPO_ROOT / "deploy" / "ADMIN.md").read_text())
        if "NetworkPolicy" in block
    ]
    assert "- ../base" in overlay
    # The guide's overlay sits beside base/; here it points at the variant from wherever tmp_path is.
    (tmp_path / "kustomization.yaml").write_text(
        overlay.replace("- ../base", f"- {os.path.relpath(K8S / variant, tmp_path)}")
    )
    done = subprocess.run(
        ["kubectl", "kustomize", str(tmp_path)], capture_output=True, text=True, timeout=60, check=True
    )
    docs, answerbox = tuple(yaml.safe_load_all(done.stdout)), _answerbox_pod(variant)
    [port] = answerbox.ports.values()
    assert _allowed(docs, INGRESS_NGINX, answerbox, port)
    llm_port = urlsplit(_configured(variant, tmp_path / "config").llm.base_url).port or 80
    assert not _allowed(docs, STRANGER, answerbox, port)
    assert not _allowed(docs, INGRESS_NGINX, LLM, llm_port)
