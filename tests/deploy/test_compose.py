"""deploy/docker-compose.yml and deploy/Dockerfile: valid, and every profile pairing starts a whole stack."""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import itertools
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from answerbox.config import REPO_ROOT, Settings

DEPLOY = REPO_ROOT / "deploy"
COMPOSE = DEPLOY / "docker-compose.yml"
PAIRINGS = list(itertools.product(["os2", "os3"], ["cpu", "gpu"]))


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def _active(profiles: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    services: dict[str, dict[str, Any]] = _resolved(profiles)["services"]
    return services


def _names(service_name: str, service: dict[str, Any]) -> set[str]:
    aliases = (service.get("networks") or {}).get("default", {}).get("aliases", [])
    return {service_name, *aliases}


def test_compose_file_matches_the_compose_spec() -> None:
    pytest.importorskip("check_jsonschema", reason="check-jsonschema (test extra) carries the compose-spec schema")
    done = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec", str(COMPOSE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("profiles", PAIRINGS, ids=["+".join(p) for p in PAIRINGS])
def test_each_profile_pairing_is_one_complete_stack(profiles: tuple[str, ...]) -> None:
    active = _active(profiles)
    published = [name for name, svc in active.items() if any(str(p).endswith(":9400:9400") for p in svc.get("ports", []))]
    assert len(published) == 1, f"{profiles}: answerbox must be published once, got {published}"
    # Only on the host's loopback unless the admin says otherwise.
    assert active[published[0]]["ports"] == ["127.0.0.1:9400:9400"]
    answerbox = active[published[0]]
    reachable = set().union(*(_names(name, svc) for name, svc in active.items()))
    env = answerbox["environment"]
    for url in (env["ANSWERBOX_OPENSEARCH__URL"], env["ANSWERBOX_LLM__BASE_URL"]):
        host = re.match(r"https?://([^:/]+)", url)
        assert host and host.group(1) in reachable, f"{profiles}: {url} names no running service"
    for dependency, spec in answerbox.get("depends_on", {}).items():
        assert dependency in active or spec.get("required") is False, f"{profiles}: needs {dependency}, which is off"
    assert sum("opensearch" in _names(n, s) for n, s in active.items()) == 1
    assert sum("llm" in _names(n, s) for n, s in active.items()) == 1


def test_opensearch_profiles_run_the_2x_and_3x_lines() -> None:
    images = {
        profile: [svc["image"] for svc in _active((profile,)).values() if "opensearch" in svc.get("image", "")]
        for profile in ("os2", "os3")
    }
    assert [i.rsplit(":", 1)[1].split(".")[0] for i in images["os2"]] == ["2"]
    assert [i.rsplit(":", 1)[1].split(".")[0] for i in images["os3"]] == ["3"]


def test_gpu_profile_reserves_gpus_and_cpu_profile_does_not() -> None:
    def gpu_services(profile: str) -> set[str]:
        active = _active((profile,))
        return {n for n, s in active.items() if "gpu" in str(s.get("deploy", {}).get("resources", {}).get("reservations", {}))}

    assert gpu_services("gpu") == {"llm-gpu", "answerbox-cuda"}
    assert gpu_services("cpu") == set()
    services = _compose()["services"]
    assert services["answerbox"]["build"]["args"]["VARIANT"] == "cpu"
    assert services["answerbox-cuda"]["build"]["args"]["VARIANT"] == "cuda"
    assert "vllm" in services["llm-gpu"]["image"]


def test_answerbox_environment_is_valid_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in _compose()["services"]["answerbox"]["environment"].items():
        monkeypatch.setenv(name, str(value))
    settings = Settings.load()
    assert settings.opensearch.url == "http://opensearch:9200"
    assert settings.llm.base_url == "http://llm:8081/v1"


def _copy_sources(dockerfile: Path) -> list[str]:
    sources: list[str] = []
    for line in dockerfile.read_text().splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            sources += line.split()[1:-1]
    return sources


def test_dockerfiles_build_from_files_that_exist() -> None:
    for name, svc in _compose()["services"].items():
        if "build" in svc:
            context = (DEPLOY / svc["build"]["context"]).resolve()
            dockerfile = context / svc["build"].get("dockerfile", "Dockerfile")
            assert dockerfile.is_file(), f"{name}: {dockerfile} is missing"
            for source in _copy_sources(dockerfile):
                assert list(context.glob(source.rstrip("/"))) or source.endswith("*"), f"{dockerfile.name}: COPY {source} matches nothing"


def test_dockerfile_has_cpu_and_cuda_variants() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    bases = dict(re.findall(r"^FROM (\S+) AS (\S+)$", text, re.MULTILINE))
    assert set(bases.values()) == {"cpu-base", "cuda-base"}
    cuda = next(image for image, stage in bases.items() if stage == "cuda-base")
    assert cuda.startswith("nvidia/cuda:") and "cudnn" in cuda
    assert re.search(r"^ARG VARIANT=cpu$", text, re.MULTILINE) and re.search(r"^FROM \$\{VARIANT\}-base$", text, re.MULTILINE)


def test_cuda_image_matches_the_cuda_that_onnxruntime_gpu_needs() -> None:
    try:
        requires = importlib.metadata.requires("onnxruntime-gpu") or []
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("onnxruntime-gpu is not installed here")
    [wanted] = [re.search(r"~=(\d+)", r).group(1) for r in requires if r.startswith("nvidia-cuda-runtime")]  # type: ignore[union-attr]
    [image] = re.findall(r"^FROM nvidia/cuda:(\d+)\.\S+ AS cuda-base$", (DEPLOY / "Dockerfile").read_text(), re.MULTILINE)
    assert image == wanted, f"the CUDA base is CUDA {image}, onnxruntime-gpu is built for CUDA {wanted}"


_VARIABLE = re.compile(r"\$\{(?P<name>\w+)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}|\$(?P<bare>\w+)")


def _interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's variable interpolation: ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``,
    ``${VAR:?error}``, ``${VAR?error}``, ``$VAR`` and ``$$`` for a literal dollar."""
    if isinstance(value, dict):
        return {k: _interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        name, op, arg = match.group("name") or match.group("bare"), match.group("op"), match.group("arg")
        unset = name not in env if op in ("-", "?") else not env.get(name)
        if op and op.endswith("?") and unset:
            raise ValueError(f"required variable {name} is missing a value: {arg}")
        if op and op.endswith("-") and unset:
            return str(arg)
        return env.get(name, "")

    parts = value.split("$$")
    return "$".join(_VARIABLE.sub(substitute, part) for part in parts)


def _resolved(profiles: tuple[str, ...]) -> dict[str, Any]:
    """What ``docker compose --profile ... config`` computes: the file with its merge keys,
    interpolated with an empty environment (the documented defaults), extension fields
    dropped, and only the services the profiles start."""
    model = {k: v for k, v in _interpolate(_compose(), {}).items() if not k.startswith("x-")}
    model["services"] = {
        name: svc for name, svc in model["services"].items() if not svc.get("profiles") or set(svc["profiles"]) & set(profiles)
    }
    return model


@pytest.mark.parametrize("profiles", PAIRINGS, ids=["+".join(p) for p in PAIRINGS])
def test_each_pairing_resolves_to_a_valid_compose_model(profiles: tuple[str, ...]) -> None:
    """The checks ``docker compose config`` makes, without Docker: these machines have none."""
    import jsonschema

    model = _resolved(profiles)
    schema = json.loads((importlib.resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json").read_text())
    jsonschema.validate(model, schema)
    services = model["services"]
    for name, svc in services.items():
        depends = svc.get("depends_on", {})
        for dependency in depends if isinstance(depends, list) else [d for d, spec in depends.items() if spec.get("required", True)]:
            assert dependency in services, f"{profiles}: {name} depends on {dependency}, which these profiles do not start"
        for volume in svc.get("volumes", []):
            source = volume.split(":")[0] if isinstance(volume, str) else volume.get("source", "")
            assert source.startswith((".", "/")) or source in model.get("volumes", {}), f"{name}: volume {source} is not declared"
        for network in svc.get("networks", {}):
            assert network == "default" or network in model.get("networks", {}), f"{name}: network {network} is not declared"
        if "build" in svc:
            context = COMPOSE.parent / svc["build"]["context"]
            assert context.is_dir(), f"{name}: build context {context} does not exist"
    # The GPU model name falls back to its documented default when VLLM_MODEL is unset.
    if "gpu" in profiles:
        assert "--model=HuggingFaceTB/SmolLM2-1.7B-Instruct" in services["llm-gpu"]["command"]


def test_interpolation_follows_compose() -> None:
    env = {"SET": "x", "EMPTY": ""}
    assert _interpolate("${SET}-${UNSET:-d}-${EMPTY:-d}-${EMPTY-d}-$$SET-$SET", env) == "x-d-d--$SET-x"
    with pytest.raises(ValueError, match="required variable UNSET"):
        _interpolate("${UNSET:?set it}", env)
