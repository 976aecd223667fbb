"""Carry what deploy/gpu/check.sh needs to a lent GPU machine, in parts that each fit one device call.

    PYTHONPATH=plugin:. python deploy/gpu/carry.py             # build the parts, print the device calls
    PYTHONPATH=plugin:. python deploy/gpu/carry.py --dry-run   # and join, check and install them here

The GPU image lacks onnxruntime-gpu (a 256 MB wheel) and some of what answerbox and the check
import (``image-packages.txt`` lists what it has). A device call takes the working tree plus
what it carries, 64 MiB in all, and the tree already fills most of that; but a warm machine
keeps what one call wrote to /tmp for the next. So:

1. the closure of answerbox's ``install_requires`` and osmem-server, at the versions installed
   with this interpreter (the project venv: what the tests ran against), less what the image
   has, is downloaded as cp312 manylinux wheels into ``~/.cache/answerbox/gpu-wheels``;
2. the wheels, stored uncompressed (their zip deflate hides the redundancy xz finds), and
   SQuAD v1.1 dev where the data cache has the bigbench tarball, go into one .tar.xz;
3. that is cut into ``.gpu-carry/part-NN`` (ignored by git through ``.git/info/exclude``), each
   as large as the 64 MiB leave beside the tree, with ``SHA256SUMS``;
4. the device calls are printed, one JSON object a line (``command`` and ``carry`` for the
   device tool's run): each leaves its part in /tmp/answerbox-gpu and checks its hash; the
   last also runs ``check.sh``, which checks every part, joins them, installs the wheels with
   ``pip --no-index`` and runs ``bench/gpu_serving.py``. Make the calls back to back: a machine
   idle past its warm time goes back, and /tmp with it.

``--dry-run`` runs each call's part step here into a temporary folder instead of /tmp, then
``check.sh --install-only`` on it with ``--python`` (a 3.12 interpreter, for the cp312 wheels).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.metadata
import io
import json
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Iterable, Iterator
from configparser import ConfigParser
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from onnx_models.data.squad import DEV_FILE, default_tarball, read_tarball_files

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CACHE = Path.home() / ".cache" / "answerbox" / "gpu-wheels"
CARRY = REPO / ".gpu-carry"
DEVICE_DIR = "/tmp/answerbox-gpu"
BUNDLE = "bundle.tar.xz"
SUMS = "SHA256SUMS"
CALL_LIMIT = 64 * 2**20  # the device tool's limit on what one call sends: the tree and what it carries
MARGIN = 2 * 2**20  # the tree may grow a little between now and the calls
EXTRA = ("osmem-server",)  # the check's own needs beside answerbox's
# The image's python3, and what pip matches its wheels against (device README's notes).
TARGET = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "os_name": "posix",
    "extra": "",
}
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)


def image_packages() -> set[str]:
    lines = (HERE / "image-packages.txt").read_text().splitlines()
    return {canonicalize_name(line) for line in lines if line and not line.startswith("#")}


def install_requires() -> list[str]:
    config = ConfigParser()
    config.read(REPO / "setup.cfg")
    lines = config["options"]["install_requires"].splitlines()
    return [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]


def closure(roots: Iterable[str], skip: set[str]) -> dict[str, str]:
    """name → installed version of every distribution ``roots`` need on the target, not descending into ``skip``.

    Extras are not followed: the check needs the packages, and the image has aiohttp for
    opensearch-py's async client."""
    found: dict[str, str] = {}
    pending = [Requirement(r) for r in roots]
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        if name in found or name in skip or (requirement.marker and not requirement.marker.evaluate(TARGET)):
            continue
        found[name] = importlib.metadata.version(name)
        pending += [Requirement(r) for r in importlib.metadata.requires(name) or []]
    return dict(sorted(found.items()))


def wheel_for(name: str, version: str) -> Path | None:
    """The cached wheel of ``name==version`` (wheel file names use the normalized name with underscores)."""
    prefix = f"{name.replace('-', '_')}-{version}-"
    return next((p for p in CACHE.glob("*.whl") if p.name.lower().startswith(prefix)), None)


def download(wanted: dict[str, str]) -> list[Path]:
    missing = [f"{n}=={v}" for n, v in wanted.items() if wheel_for(n, v) is None]
    if missing:
        CACHE.mkdir(parents=True, exist_ok=True)
        platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.12",
            "--implementation",
            "cp",
        ]
        subprocess.run([*command, *platforms, "-d", str(CACHE), *missing], check=True)
    wheels = {n: wheel_for(n, v) for n, v in wanted.items()}
    if absent := sorted(n for n, w in wheels.items() if w is None):
        raise SystemExit(f"pip downloaded no wheel for {absent}")
    return sorted(w for w in wheels.values() if w is not None)


def stored(wheel: Path) -> bytes:
    """``wheel`` with every member stored, not deflated: the same files, so its RECORD still holds."""
    out = io.BytesIO()
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as target:
        for info in source.infolist():
            data = source.read(info)  # read as deflated first: the ZipInfo says how
            info.compress_type = zipfile.ZIP_STORED
            target.writestr(info, data)
    return out.getvalue()


def dev_data() -> bytes | None:
    """SQuAD v1.1 dev gzipped, as ``onnx_models.data.squad.load_squad`` reads a folder, where the data cache has the
    tarball."""
    if not default_tarball().exists():
        return None
    return gzip.compress(json.dumps(read_tarball_files([DEV_FILE], default_tarball())[DEV_FILE]).encode(), mtime=0)


def _add(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))


def bundle(wheels: list[Path], data: bytes | None, target: Path) -> Path:
    """wheels/*.whl and data/<dev>.gz in one .tar.xz (xz's own threads where the xz tool is here)."""
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "bundle.tar"
        with tarfile.open(plain, "w", format=tarfile.PAX_FORMAT) as archive:
            for wheel in wheels:
                _add(archive, f"wheels/{wheel.name}", stored(wheel))
            if data is not None:
                _add(archive, f"data/{DEV_FILE}.gz", data)
        if shutil.which("xz"):
            subprocess.run(["xz", "-T0", "-6", "-f", str(plain)], check=True)
        else:
            Path(f"{plain}.xz").write_bytes(lzma.compress(plain.read_bytes(), preset=6))
        shutil.move(f"{plain}.xz", target)
    return target


def tree_bytes() -> int:
    """What a device call sends besides what it carries: tracked files and untracked ones git does not ignore."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout
    return sum(path.stat().st_size for name in listed.decode().split("\0") if name and (path := REPO / name).is_file())


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(2**20):
            digest.update(chunk)
    return digest.hexdigest()


def split(source: Path, folder: Path, part_bytes: int) -> list[Path]:
    """``folder/part-NN`` of at most ``part_bytes`` each, and ``SHA256SUMS`` over them and ``source``."""
    for old in folder.glob("part-*"):
        old.unlink()
    parts: list[Path] = []
    with source.open("rb") as handle:
        while chunk := handle.read(part_bytes):
            parts.append(folder / f"part-{len(parts) + 1:02d}")
            parts[-1].write_bytes(chunk)
    lines = [f"{sha256(p)}  {p.name}" for p in parts] + [f"{sha256(source)}  {BUNDLE}"]
    (folder / SUMS).write_text("\n".join(lines) + "\n")
    return parts


def part_command(part: str, last: bool, directory: str = DEVICE_DIR) -> str:
    """One device call's command: leave the part in ``directory`` and check its hash; the last runs check.sh."""
    step = (
        f"set -eu; d={directory}; mkdir -p $d; cp .gpu-carry/{SUMS} .gpu-carry/{part} $d/; (cd $d && grep ' "
        f"{part}$' {SUMS} | sha256sum -c --strict); ls $d"
    )
    return f"{step}; bash deploy/gpu/check.sh --device cuda --parts $d" if last else step


def calls(parts: list[Path]) -> Iterator[dict[str, object]]:
    for part in parts:
        last = part == parts[-1]
        carry = [f".gpu-carry/{SUMS}", f".gpu-carry/{part.name}"]
        yield {"command": part_command(part.name, last), "carry": carry, "timeout_s": 600 if last else 120}


def exclude_carry_folder() -> None:
    exclude = Path(
        subprocess.run(
            ["git", "rev-parse", "--git-path", "info/exclude"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    exclude = exclude if exclude.is_absolute() else REPO / exclude
    exclude.parent.mkdir(parents=True, exist_ok=True)
    lines = exclude.read_text().splitlines() if exclude.exists() else []
    if f"/{CARRY.name}/" not in lines:
        exclude.write_text("\n".join([*lines, f"/{CARRY.name}/"]) + "\n")


def dry_run(parts: list[Path], python: str) -> dict[str, object]:
    """Each call's part step, run here into a temporary folder; then check.sh's join, checks and install."""
    report: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as directory:
        started = time.perf_counter()
        for part in parts:
            subprocess.run(
                ["bash", "-c", part_command(part.name, False, directory)],
                cwd=REPO,
                check=True,
                stdout=subprocess.DEVNULL,
            )
        report["part_steps_s"] = round(time.perf_counter() - started, 1)
        if shutil.which(python) is None:
            report["install"] = f"skipped: no {python} here to install cp312 wheels with"
            return report
        started = time.perf_counter()
        env = {**os.environ, "PYTHON": python}
        subprocess.run(
            ["bash", "deploy/gpu/check.sh", "--parts", directory, "--install-only"], cwd=REPO, check=True, env=env
        )
        report["join_check_install_s"] = round(time.perf_counter() - started, 1)
        report["installed"] = sorted(
            p.name for p in (Path(directory) / "site").iterdir() if p.name.endswith(".dist-info")
        )
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--dry-run", action="store_true", help="join, check and install the parts here instead of printing the calls"
    )
    parser.add_argument(
        "--python", default="python3.12", help="the interpreter --dry-run installs the cp312 wheels with"
    )
    parser.add_argument("--part-mib", type=float, help="part size (default: what 64 MiB leaves beside the tree)")
    args = parser.parse_args(argv)
    timings: dict[str, float] = {}
    started = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal started
        timings[name] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()

    wanted = closure([*install_requires(), *EXTRA], image_packages())
    wheels = download(wanted)
    lap("resolve_and_download_s")
    data = dev_data()
    key = hashlib.sha256(
        "\n".join([*(w.name for w in wheels), hashlib.sha256(data or b"").hexdigest()]).encode()
    ).hexdigest()[:16]
    cached = CACHE / f"bundle-{key}.tar.xz"  # the same wheels and data make the same bundle: built once
    if not cached.exists():
        bundle(wheels, data, cached)
    lap("bundle_s")
    exclude_carry_folder()
    CARRY.mkdir(exist_ok=True)
    tree = tree_bytes()
    part_bytes = int(args.part_mib * 2**20) if args.part_mib else CALL_LIMIT - tree - MARGIN
    parts = split(cached, CARRY, part_bytes)
    lap("split_s")
    summary = {
        "carried": wanted,
        "wheels_mb": round(sum(w.stat().st_size for w in wheels) / 1e6, 1),
        "data": f"{DEV_FILE}.gz ({len(data) / 1e6:.1f} MB)"
        if data
        else f"none: no {default_tarball()}; the check uses the sample corpus",
        "bundle": {"path": str(cached), "mb": round(cached.stat().st_size / 1e6, 1)},
        "tree_mib": round(tree / 2**20, 1),
        "parts": {p.name: round(p.stat().st_size / 2**20, 2) for p in parts},
        "part_mib": round(part_bytes / 2**20, 2),
        "timings": timings,
    }
    if args.dry_run:
        summary["dry_run"] = dry_run(parts, args.python)
    print(json.dumps(summary, indent=1), file=sys.stderr)
    if not args.dry_run:
        for call in calls(parts):
            print(json.dumps(call))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
