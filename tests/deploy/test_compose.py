"""deploy/docker-compose.yml (and its secured overlay, docker-compose.secure.yml) and
deploy/Dockerfile: valid, and every profile pairing of either stack starts a whole stack;
the secured OpenSearch's healthcheck logs in without putting the password on a command line."""

from __future__ import annotations

import base64
import fnmatch
import http.server
import importlib.metadata
import importlib.resources
import itertools
import json
import re
import secrets
import shlex
import shutil
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from answerbox.core.config import Settings

from tests.support.repo import REPO_ROOT

DEPLOY = REPO_ROOT / "deploy"
COMPOSE = DEPLOY / "docker-compose.yml"
SECURE = DEPLOY / "docker-compose.secure.yml"
PAIRINGS = list(itertools.product(["os2", "os3"], ["cpu", "gpu"]))
# The secured overlay refuses to start without these; any value stands in for them here.
PASSWORDS = {"OPENSEARCH_INITIAL_ADMIN_PASSWORD": "admin-from-env", "ANSWERBOX_SERVICE_PASSWORD": "service-from-env"}
# Each stack: its compose files, in -f order, and the environment it needs.
STACKS: dict[str, tuple[tuple[Path, ...], dict[str, str]]] = {
    "open": ((COMPOSE,), {}),
    "secure": ((COMPOSE, SECURE), PASSWORDS),
}
STACK_PAIRINGS = [(stack, pairing) for stack in STACKS for pairing in PAIRINGS]
STACK_IDS = [f"{stack}:{'+'.join(pairing)}" for stack, pairing in STACK_PAIRINGS]


def _compose(path: Path = COMPOSE) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def _active(profiles: tuple[str, ...], stack: str = "open") -> dict[str, dict[str, Any]]:
    services: dict[str, dict[str, Any]] = _resolved(profiles, stack)["services"]
    return services


def _names(service_name: str, service: dict[str, Any]) -> set[str]:
    aliases = (service.get("networks") or {}).get("default", {}).get("aliases", [])
    return {service_name, *aliases}


def test_compose_file_matches_the_compose_spec() -> None:
    pytest.importorskip("check_jsonschema", reason="check-jsonschema (test extra) carries the compose-spec schema")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "check_jsonschema",
            "--builtin-schema",
            "vendor.compose-spec",
            str(COMPOSE),
            str(SECURE),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(("stack", "profiles"), STACK_PAIRINGS, ids=STACK_IDS)
def test_each_profile_pairing_is_one_complete_stack(stack: str, profiles: tuple[str, ...]) -> None:
    active = _active(profiles, stack)
    published = [
        name for name, svc in active.items() if any(str(p).endswith(":9400:9400") for p in svc.get("ports", []))
    ]
    assert len(published) == 1, f"{profiles}: answerbox must be published once, got {published}"
    # Only on the host's loopback unless the admin says otherwise.
    assert active[published[0]]["ports"] == ["127.0.0.1:9400:9400"]
    answerbox = active[published[0]]
    reachable = set().union(*(_names(name, svc) for name, svc in active.items()))
    env = answerbox["environment"]
    for url in (env["ANSWERBOX_OPENSEARCH__URL"], env["ANSWERBOX_LLM__BASE_URL"]):
        host = re.match(r"https?://([^:/]+)", url)
        assert host, f"{profiles}: {url} names no running service"
        assert host.group(1) in reachable, f"{profiles}: {url} names no running service"
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
        return {
            n
            for n, s in active.items()
            if "gpu" in str(s.get("deploy", {}).get("resources", {}).get("reservations", {}))
        }

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
                assert list(context.glob(source.rstrip("/"))) or source.endswith("*"), (
                    f"{dockerfile.name}: COPY {source} matches nothing"
                )


def test_dockerfile_has_cpu_and_cuda_variants() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    bases = dict(re.findall(r"^FROM (\S+) AS (\S+)$", text, re.MULTILINE))
    assert set(bases.values()) == {"cpu-base", "cuda-base"}
    cuda = next(image for image, stage in bases.items() if stage == "cuda-base")
    assert cuda.startswith("nvidia/cuda:")
    assert "cudnn" in cuda
    assert re.search(r"^ARG VARIANT=cpu$", text, re.MULTILINE)
    assert re.search(r"^FROM \$\{VARIANT\}-base$", text, re.MULTILINE)


def test_cuda_image_matches_the_cuda_that_onnxruntime_gpu_needs() -> None:
    try:
        requires = importlib.metadata.requires("onnxruntime-gpu") or []
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("onnxruntime-gpu is not installed here")
    [wanted] = [re.search(r"~=(\d+)", r).group(1) for r in requires if r.startswith("nvidia-cuda-runtime")]  # type: ignore[union-attr]
    [image] = re.findall(
        r"^FROM nvidia/cuda:(\d+)\.\S+ AS cuda-base$", (DEPLOY / "Dockerfile").read_text(), re.MULTILINE
    )
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


def _target(volume: str | dict[str, Any]) -> str:
    return volume.split(":")[1] if isinstance(volume, str) else str(volume["target"])


def _merge(base: Any, override: Any, path: tuple[str, ...] = ()) -> Any:
    """Compose's merge of a later ``-f`` file into the model so far, for what these files use:
    mappings merge key by key; ``command``, ``entrypoint`` and ``healthcheck.test`` are
    replaced; a service's volumes merge by target; other sequences gain what is new."""
    if isinstance(base, dict) and isinstance(override, dict):
        return {**base, **{k: _merge(base[k], v, (*path, k)) if k in base else v for k, v in override.items()}}
    if isinstance(base, list) and isinstance(override, list):
        if path[-1] in ("command", "entrypoint") or path[-2:] == ("healthcheck", "test"):
            return override
        if path[-1] == "volumes":
            replaced = {_target(v) for v in override}
            return [v for v in base if _target(v) not in replaced] + override
        return base + [v for v in override if v not in base]
    return override


def _resolved(profiles: tuple[str, ...], stack: str = "open") -> dict[str, Any]:
    """What ``docker compose -f ... --profile ... config`` computes: each file with its merge
    keys, interpolated with the stack's environment (else the documented defaults), merged in
    order, extension fields dropped, and only the services the profiles start."""
    files, env = STACKS[stack]
    merged: dict[str, Any] = {}
    for path in files:
        merged = _merge(merged, _interpolate(_compose(path), env))
    model = {k: v for k, v in merged.items() if not k.startswith("x-")}
    model["services"] = {
        name: svc
        for name, svc in model["services"].items()
        if not svc.get("profiles") or set(svc["profiles"]) & set(profiles)
    }
    return model


@pytest.mark.parametrize(("stack", "profiles"), STACK_PAIRINGS, ids=STACK_IDS)
def test_each_pairing_resolves_to_a_valid_compose_model(stack: str, profiles: tuple[str, ...]) -> None:
    """The checks ``docker compose config`` makes, without Docker: these machines have none."""
    import jsonschema

    model = _resolved(profiles, stack)
    schema = json.loads(
        (importlib.resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json").read_text()
    )
    jsonschema.validate(model, schema)
    services = model["services"]
    for name, svc in services.items():
        depends = svc.get("depends_on", {})
        for dependency in (
            depends if isinstance(depends, list) else [d for d, spec in depends.items() if spec.get("required", True)]
        ):
            assert dependency in services, (
                f"{profiles}: {name} depends on {dependency}, which these profiles do not start"
            )
        for volume in svc.get("volumes", []):
            source = volume.split(":")[0] if isinstance(volume, str) else volume.get("source", "")
            assert source.startswith((".", "/")) or source in model.get("volumes", {}), (
                f"{name}: volume {source} is not declared"
            )
            # Files the repository ships; certificates are the admin's (or make-certs.sh's).
            if source.startswith(".") and "/certs/" not in source:
                assert (DEPLOY / source).exists(), f"{name}: mounts {source}, which does not exist"
        for network in svc.get("networks", {}):
            assert network == "default" or network in model.get("networks", {}), (
                f"{name}: network {network} is not declared"
            )
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


# The secured stack: docker-compose.yml with docker-compose.secure.yml laid over it.

SECURE_DIR = DEPLOY / "secure"
ROLES = SECURE_DIR / "opensearch-security" / "roles.yml"
ROLES_MAPPING = SECURE_DIR / "opensearch-security" / "roles_mapping.yml"
OPENSEARCH_HOME = "/usr/share/opensearch"
# Action groups and actions that let a role write or delete documents (OpenSearch security's
# static action groups, and wildcards over them).
_WRITES = {"crud", "write", "index", "delete", "data_access", "indices_all", "manage", "unlimited", "*", "indices:*"}


def _opensearch(profiles: tuple[str, ...] = ("os2", "cpu")) -> dict[str, Any]:
    [service] = [svc for svc in _active(profiles, "secure").values() if "opensearch" in svc.get("image", "")]
    return service


def _answerbox(profiles: tuple[str, ...] = ("os2", "cpu")) -> dict[str, Any]:
    [service] = [svc for name, svc in _active(profiles, "secure").items() if name.startswith("answerbox")]
    return service


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    """target → source of a service's bind mounts."""
    return {v["target"]: v["source"] for v in service["volumes"] if isinstance(v, dict) and v.get("type") == "bind"}


def _published(port: str | dict[str, Any]) -> tuple[str, str]:
    """(host address, container port) of a ports entry; an empty address is every interface."""
    if isinstance(port, dict):
        return str(port.get("host_ip", "")), str(port["target"])
    *host, container = str(port).split(":")
    return (host[0] if len(host) == 2 else ""), container.split("/")[0]


@pytest.mark.parametrize("profiles", PAIRINGS, ids=["+".join(p) for p in PAIRINGS])
def test_secure_stack_runs_opensearch_with_security_and_tls(profiles: tuple[str, ...]) -> None:
    opensearch = _opensearch(profiles)
    env = opensearch["environment"]
    assert env["DISABLE_SECURITY_PLUGIN"] != "true"
    assert str(env.get("plugins.security.disabled", "false")) != "true"
    assert env["DISABLE_INSTALL_DEMO_CONFIG"] == "true", "the demo configuration brings users with well-known passwords"
    mounts = _mounts(opensearch)
    config = (DEPLOY / mounts[f"{OPENSEARCH_HOME}/config/opensearch.yml"]).read_text()
    settings = yaml.safe_load(config)
    assert settings.get("plugins.security.disabled") is not True
    assert settings["plugins.security.ssl.http.enabled"] is True
    # Every certificate OpenSearch is told to read is mounted where it looks (config/).
    for key in [k for k in settings if k.endswith("_filepath")]:
        assert f"{OPENSEARCH_HOME}/config/{settings[key]}" in mounts, f"{key}: {settings[key]} is not mounted"
    # Placeholders in opensearch.yml are read from the container's environment.
    for placeholder in re.findall(r"\$\{(\w+)\}", config):
        assert env.get(placeholder), f"opensearch.yml reads ${{{placeholder}}}, which the service does not set"
    for name in ("roles.yml", "roles_mapping.yml"):
        assert mounts[f"{OPENSEARCH_HOME}/config/opensearch-security/{name}"].endswith(f"/opensearch-security/{name}")
    # The entrypoint writes the users, then hands over to the image's own.
    [script] = [DEPLOY / source for target, source in mounts.items() if target == opensearch["entrypoint"][-1]]
    assert script.read_text().rstrip().endswith("exec ./opensearch-docker-entrypoint.sh opensearch")
    # Its healthcheck (a mounted script) asks over TLS.
    [check] = [DEPLOY / source for target, source in mounts.items() if target in opensearch["healthcheck"]["test"]]
    assert "https://" in check.read_text()


def test_secure_stack_takes_both_passwords_from_the_environment() -> None:
    raw = _compose(SECURE)
    with pytest.raises(ValueError, match="required variable OPENSEARCH_INITIAL_ADMIN_PASSWORD"):
        _interpolate(raw, {"ANSWERBOX_SERVICE_PASSWORD": "s"})
    with pytest.raises(ValueError, match="required variable ANSWERBOX_SERVICE_PASSWORD"):
        _interpolate(raw, {"OPENSEARCH_INITIAL_ADMIN_PASSWORD": "a"})
    # No literal: every password is a required variable, in both services.
    secrets = {
        "OPENSEARCH_INITIAL_ADMIN_PASSWORD",
        "ANSWERBOX_SERVICE_PASSWORD",
        "ANSWERBOX_OPENSEARCH__SERVICE_PASSWORD",
    }
    seen = 0
    for service in raw["services"].values():
        for name, value in service.get("environment", {}).items():
            if name in secrets:
                seen += 1
                assert re.fullmatch(r"\$\{(OPENSEARCH_INITIAL_ADMIN|ANSWERBOX_SERVICE)_PASSWORD:\?[^}]+\}", value), (
                    f"{name}: {value}"
                )
    assert seen == 2 * 3  # two OpenSearch services with both, two answerbox services with one each
    assert "PASSWORD" not in yaml.safe_dump(_compose()), "the open stack needs no password"
    # The password answerbox logs in with is the one OpenSearch hashed for its account.
    assert (
        _answerbox()["environment"]["ANSWERBOX_OPENSEARCH__SERVICE_PASSWORD"] == PASSWORDS["ANSWERBOX_SERVICE_PASSWORD"]
    )
    assert _opensearch()["environment"]["ANSWERBOX_SERVICE_PASSWORD"] == PASSWORDS["ANSWERBOX_SERVICE_PASSWORD"]


@pytest.mark.parametrize(("stack", "profiles"), STACK_PAIRINGS, ids=STACK_IDS)
def test_opensearch_is_never_published_on_every_interface(stack: str, profiles: tuple[str, ...]) -> None:
    for name, svc in _active(profiles, stack).items():
        for port in svc.get("ports", []):
            host, container = _published(port)
            assert container not in ("9200", "9300", "9600") or host in ("127.0.0.1", "::1"), f"{name} publishes {port}"
            assert host, f"{name}: {port} is published on every interface"


def test_answerbox_binds_where_the_admin_says() -> None:
    answerbox = _interpolate(_compose(), {"ANSWERBOX_BIND": "0.0.0.0"})["services"]["answerbox"]
    assert answerbox["ports"] == ["0.0.0.0:9400:9400"]


@pytest.mark.parametrize("profiles", PAIRINGS, ids=["+".join(p) for p in PAIRINGS])
def test_secure_answerbox_talks_https_with_its_service_account(
    profiles: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    answerbox = _answerbox(profiles)
    for name, value in answerbox["environment"].items():
        monkeypatch.setenv(name, str(value))
    settings = Settings.load().opensearch
    assert settings.url == "https://opensearch:9200"
    assert settings.verify_certs
    # It trusts the CA that signed OpenSearch's certificate: the same file, mounted.
    trusted = yaml.safe_load((SECURE_DIR / "opensearch.yml").read_text())[
        "plugins.security.ssl.http.pemtrustedcas_filepath"
    ]
    assert (
        _mounts(answerbox)[str(settings.ca_certs)]
        == _mounts(_opensearch(profiles))[f"{OPENSEARCH_HOME}/config/{trusted}"]
    )
    # Its account is a user the entrypoint creates, holding the service role and nothing else.
    assert f"\n{settings.service_username}:\n" in (SECURE_DIR / "opensearch-entrypoint.sh").read_text()
    mapping = yaml.safe_load(ROLES_MAPPING.read_text())
    assert [role for role, spec in mapping.items() if settings.service_username in spec.get("users", [])] == [
        "answerbox_service"
    ]


def _actions_on(roles: dict[str, Any], index: str) -> dict[str, set[str]]:
    """Role → the actions it allows on ``index`` (index patterns are globs)."""
    found: dict[str, set[str]] = {}
    for role, spec in roles.items():
        for grant in spec.get("index_permissions", []):
            if any(fnmatch.fnmatchcase(index, pattern) for pattern in grant["index_patterns"]):
                found.setdefault(role, set()).update(grant["allowed_actions"])
    return found


def _writers(actions: dict[str, set[str]]) -> set[str]:
    """The roles among ``_actions_on``'s that may write the index."""
    return {
        role
        for role, allowed in actions.items()
        if allowed & _WRITES or any(a.startswith("indices:data/write") for a in allowed)
    }


def test_roles_give_the_pipelines_index_to_pipeline_admins_only() -> None:
    roles = {k: v for k, v in yaml.safe_load(ROLES.read_text()).items() if k != "_meta"}
    defaults = Settings().opensearch
    pipelines = _actions_on(roles, defaults.pipeline_index)
    assert _writers(pipelines) == {"answerbox_pipeline_admin"}
    assert pipelines["answerbox_pipeline_admin"] == {"crud"}  # PUT, GET (a search) and DELETE
    # A PUT asks whether the cluster holds a pipeline of that id, which answerbox's would shadow.
    assert roles["answerbox_pipeline_admin"]["cluster_permissions"] == ["cluster:admin/search/pipeline/get"]
    # The service reads a pipeline by id to run it, and creates the index at the first PUT.
    assert pipelines["answerbox_service"] <= {
        "get",
        "indices:admin/get",
        "indices:admin/create",
        "indices:monitor/settings/get",
    }
    assert "answerbox_searcher" not in pipelines
    cache = _actions_on(roles, defaults.cache_index)
    assert {"get", "index"} <= cache["answerbox_service"]
    assert "answerbox_searcher" not in cache
    assert "cluster_composite_ops_ro" in roles["answerbox_searcher"]["cluster_permissions"]  # processors send _msearch
    # Memories: only the service writes them (document-level security filters reads, not
    # writes); searchers read theirs, and see only theirs.
    memory = _actions_on(roles, Settings().memory.index)
    assert _writers(memory) == {"answerbox_service"}
    (grant,) = [
        g for g in roles["answerbox_searcher"]["index_permissions"] if Settings().memory.index in g["index_patterns"]
    ]
    assert grant["allowed_actions"] == ["read"]
    assert json.loads(grant["dls"]) == {"term": {"user": "${user.name}"}}
    # Each role is mapped to someone, and the file holds nothing but roles.
    mapping = yaml.safe_load(ROLES_MAPPING.read_text())
    assert set(roles) <= set(mapping)
    assert all(set(spec) <= {"description", "cluster_permissions", "index_permissions"} for spec in roles.values())


@pytest.mark.skipif(not shutil.which("openssl"), reason="make-certs.sh needs openssl")
def test_make_certs_writes_what_the_stack_mounts_and_answerbox_trusts(tmp_path: Path) -> None:
    subprocess.run(
        ["bash", str(SECURE_DIR / "make-certs.sh"), str(tmp_path)], check=True, capture_output=True, timeout=60
    )
    mounted = {
        Path(source).name
        for source in [*_mounts(_opensearch()).values(), *_mounts(_answerbox()).values()]
        if "/certs/" in source
    }
    assert mounted == {"root-ca.pem", "node.pem", "node-key.pem"}
    assert all((tmp_path / name).is_file() for name in mounted)
    assert (tmp_path / "node-key.pem").read_text().startswith("-----BEGIN PRIVATE KEY-----")  # PKCS#8
    read_subject = ["openssl", "x509", "-in", str(tmp_path / "node.pem"), "-noout", "-subject", "-nameopt", "RFC2253"]
    subject = subprocess.run(read_subject, check=True, capture_output=True, text=True, timeout=30).stdout.strip()
    assert subject == "subject=" + _opensearch()["environment"]["OPENSEARCH_NODE_DN"]
    # answerbox's check (passthrough and opensearch-py both verify against ca_certs) passes
    # for the name it uses, and fails for any other.
    assert _tls_handshake(tmp_path, "opensearch")
    with pytest.raises(ssl.SSLCertVerificationError):
        _tls_handshake(tmp_path, "elsewhere")


def _tls_handshake(certs: Path, hostname: str) -> bool:
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(certs / "node.pem", certs / "node-key.pem")
    client = ssl.create_default_context(cafile=str(certs / "root-ca.pem"))
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    ends = [
        client.wrap_bio(to_client, to_server, server_hostname=hostname),
        server.wrap_bio(to_server, to_client, server_side=True),
    ]
    done = [False, False]
    for _ in range(10):
        for i, end in enumerate(ends):
            if not done[i]:
                try:
                    end.do_handshake()
                    done[i] = True
                except ssl.SSLWantReadError:
                    pass
        if all(done):
            return True
    return False


# The secured OpenSearch's healthcheck, run here as Docker runs it in the container (the
# service's environment, the image's working directory with the service's mounts in it),
# against a stand-in for OpenSearch that speaks TLS with make-certs.sh's node certificate.

OPENSEARCH_PROFILES = [("os2", "cpu"), ("os3", "cpu")]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not shutil.which("openssl"):
        pytest.skip("make-certs.sh needs openssl")
    folder = tmp_path_factory.mktemp("certs")
    subprocess.run(
        ["bash", str(SECURE_DIR / "make-certs.sh"), str(folder)], check=True, capture_output=True, timeout=60
    )
    return folder


@dataclass
class StandIn:
    """What the stand-in OpenSearch answers and what it was asked."""

    port: int = 0
    password: str = ""
    healthy: bool = True
    requests: list[tuple[str, str | None]] = field(default_factory=list)


@contextmanager
def _stand_in_opensearch(certs: Path) -> Iterator[StandIn]:
    """An https server on a free port of 127.0.0.1: ``GET /_cluster/health`` answers 200 for
    admin with ``StandIn.password``, 401 for anyone else, and 408 (what OpenSearch answers when
    ``wait_for_status`` times out) when it is not healthy."""
    state = StandIn()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            authorization = self.headers.get("Authorization")
            state.requests.append((self.path, authorization))
            admin = "Basic " + base64.b64encode(f"admin:{state.password}".encode()).decode()
            status = 401 if authorization != admin else 200 if state.healthy else 408
            body = json.dumps({"status": "yellow" if status == 200 else "red", "timed_out": status == 408}).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs / "node.pem", certs / "node-key.pem")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _run_healthcheck(
    opensearch: dict[str, Any], certs: Path, work: Path, stand_in: StandIn, password: str
) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    """Runs the service's healthcheck with ``password`` in its environment; how it ended,
    and the argument list of every curl it started. PATH holds only a curl that records its
    arguments, then runs the real one towards the stand-in (``--connect-to`` keeps the name
    "opensearch" for TLS): any other program the check started would not be found."""
    home = work / "home"  # the image's working directory, with the service's mounts in it
    for target, source in _mounts(opensearch).items():
        if target.startswith(f"{OPENSEARCH_HOME}/"):
            copy = home / target.removeprefix(f"{OPENSEARCH_HOME}/")
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(certs / Path(source).name if "/certs/" in source else DEPLOY / source, copy)
    bin_dir, log = work / "bin", work / "curl-argv.jsonl"
    bin_dir.mkdir(exist_ok=True)
    curl, python = shutil.which("curl"), sys.executable
    record = "import json, sys; print(json.dumps(sys.argv[2:]), file=open(sys.argv[1], 'a'))"
    (bin_dir / "curl").write_text(
        "#!/bin/sh\n"
        f'{shlex.quote(python)} -c {shlex.quote(record)} {shlex.quote(str(log))} "$@"\n'
        f'exec {shlex.quote(str(curl))} --connect-to opensearch:9200:127.0.0.1:{stand_in.port} "$@"\n'
    )
    (bin_dir / "curl").chmod(0o755)
    kind, *command = opensearch["healthcheck"]["test"]
    argv = ["/bin/sh", "-c", command[0]] if kind == "CMD-SHELL" else command
    argv = [
        str(home / a.removeprefix(f"{OPENSEARCH_HOME}/")) if a.startswith(f"{OPENSEARCH_HOME}/") else a for a in argv
    ]
    argv[0] = shutil.which(argv[0]) or argv[0]
    assert "OPENSEARCH_INITIAL_ADMIN_PASSWORD" in opensearch["environment"], (
        "the check reads the password from the service's environment"
    )
    env = {
        **{k: str(v) for k, v in opensearch["environment"].items()},
        "OPENSEARCH_INITIAL_ADMIN_PASSWORD": password,
        "PATH": str(bin_dir),
        "HOME": str(home),
    }
    log.unlink(missing_ok=True)
    done = subprocess.run(argv, cwd=home, env=env, capture_output=True, text=True, timeout=60, check=False)
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return done, calls


@pytest.mark.skipif(not (shutil.which("curl") and shutil.which("bash")), reason="the healthcheck runs curl (and bash)")
@pytest.mark.parametrize("profiles", OPENSEARCH_PROFILES, ids=["+".join(p) for p in OPENSEARCH_PROFILES])
def test_secure_healthcheck_keeps_the_admin_password_off_every_command_line(
    profiles: tuple[str, ...], certs: Path, tmp_path: Path
) -> None:
    opensearch = _opensearch(profiles)
    # What docker inspect shows of the check names no password.
    assert not any(p in json.dumps(opensearch["healthcheck"]) for p in PASSWORDS.values())
    # A password with what a shell or curl's config syntax could trip on.
    token = secrets.token_hex(8)
    password = f"{token} \"q\\b'$HOME%s&:x"
    with _stand_in_opensearch(certs) as stand_in:
        stand_in.password = password
        done, calls = _run_healthcheck(opensearch, certs, tmp_path, stand_in, password)
        assert calls, "the check runs curl"
        for argv in calls:
            assert not any(token in arg for arg in argv), f"the password is on curl's command line: {argv}"
        assert done.returncode == 0, done.stdout + done.stderr
        # It logged in as admin, and asked for the cluster's health.
        [(path, _)] = stand_in.requests
        assert path.startswith("/_cluster/health?")
        assert "wait_for_status=yellow" in path
        # It fails for a password OpenSearch does not take, and for a cluster that is not yellow.
        assert _run_healthcheck(opensearch, certs, tmp_path, stand_in, password + "-wrong")[0].returncode != 0
        stand_in.healthy = False
        assert _run_healthcheck(opensearch, certs, tmp_path, stand_in, password)[0].returncode != 0
        assert [authorization is not None for _, authorization in stand_in.requests] == [True, True, True]
