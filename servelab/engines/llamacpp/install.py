"""Finding, registering and building llama-server.

Lookup order (``find_llama_server``): env SERVELAB_LLAMA_SERVER, then ``llama_server = "PATH"`` in
config_dir()/config.toml, then a build in cache_dir()/llama.cpp/<version>-<flags>/build/bin/llama-server.
The build (``install_llama_cpp``) downloads the pinned llama-cpp-python sdist, which vendors llama.cpp, and
compiles only the server target; the layout (dl/, src/, build/) is shared by every build key.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from servelab import paths
from servelab.engines import settings
from servelab.engines.process import read_log_tail, telling_line
from servelab.errors import DeviceError, EngineError

PINNED_VERSION = "0.3.36"  # llama-cpp-python; vendors llama.cpp build b1-0c1e570
ENV_VAR = "SERVELAB_LLAMA_SERVER"
CONFIG_KEY = "llama_server"
BINARY = "llama-server"
VERSION_TIMEOUT_S = 20


@dataclass(frozen=True)
class LlamaServerBinary:
    path: Path
    version: str  # first line of ``--version``, e.g. "version: 0.5.0-dev (build 1, commit 0c1e570)"
    source: str  # "env", "config", "cache" or "build"


def config_file(config_dir: Path | None = None) -> Path:
    return settings.config_file(config_dir)


def check_llama_server(path: Path | str) -> str:
    """The binary's version line; EngineError unless ``path`` runs and says it is a llama.cpp build."""
    path = Path(path).expanduser()
    if not path.is_file() or not os.access(path, os.X_OK):
        raise EngineError(f"{path} is not an executable file; give the path of a llama-server binary")
    try:
        done = subprocess.run(
            [str(path), "--version"], capture_output=True, timeout=VERSION_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(
            f"{path} does not run as llama-server ({exc}); give the path of a llama-server binary"
        ) from exc
    text = (done.stdout + done.stderr).decode("utf-8", errors="replace")
    match = re.search(r"^version: .*build.*$", text, re.MULTILINE)
    if done.returncode != 0 or match is None:
        raise EngineError(
            f"{path} is not llama-server: `--version` does not name a llama.cpp build; give the right binary"
        )
    return match.group(0).strip()


def cached_binaries(cache_dir: Path | None = None) -> list[Path]:
    """Built llama-servers in the cache, the pinned version first, then (on x86) builds without AMX before older
    ones with it, GPU builds before CPU ones."""
    root = (cache_dir or paths.cache_dir()) / "llama.cpp"
    found = [p for p in root.glob(f"*/build/bin/{BINARY}") if p.is_file()]
    return sorted(
        found,
        key=lambda p: (
            not p.parts[-4].startswith(PINNED_VERSION),
            _x86() and not p.parts[-4].endswith("-noamx"),
            "-cpu" in p.parts[-4],
            p.parts[-4],
        ),
    )


def configured_binary(config_dir: Path | None = None) -> str | None:
    """``llama_server`` from config.toml, or None."""
    return settings.read_setting(CONFIG_KEY, config_dir)


def find_llama_server(
    env: Mapping[str, str] | None = None, config_dir: Path | None = None, cache_dir: Path | None = None
) -> LlamaServerBinary:
    """Resolve llama-server: env, then config, then cache. EngineError saying how to install when missing."""
    env = os.environ if env is None else env
    if env.get(ENV_VAR):
        return LlamaServerBinary(Path(env[ENV_VAR]), check_llama_server(env[ENV_VAR]), "env")
    configured = configured_binary(config_dir)
    if configured:
        return LlamaServerBinary(Path(configured), check_llama_server(configured), "config")
    cached = cached_binaries(cache_dir)
    if cached:
        return LlamaServerBinary(cached[0], check_llama_server(cached[0]), "cache")
    raise EngineError(
        "no llama-server found; run `servelab engine install llama.cpp` (builds it, ~5 min on 2 cores) "
        f"or `servelab engine install llama.cpp --llama-server PATH`, or set {ENV_VAR}"
    )


def find() -> LlamaServerBinary:
    """The installer contract (servelab/engines/base.py): the llama-server servelab would use."""
    return find_llama_server()


def install(*, cuda: bool, progress: Callable[[str], None]) -> LlamaServerBinary:
    return install_llama_cpp(cuda=cuda, progress=progress)


def register(path: Path) -> LlamaServerBinary:
    return register_llama_server(path)


def register_llama_server(path: Path | str, config_dir: Path | None = None) -> LlamaServerBinary:
    """Check ``path`` and record it as ``llama_server`` in config.toml (other settings are kept)."""
    path = Path(path).expanduser().resolve()
    version = check_llama_server(path)
    settings.write_setting(CONFIG_KEY, str(path), config_dir)
    return LlamaServerBinary(path, version, "config")


# --- building from the pinned sdist -------------------------------------------------------------------

SDIST = f"llama-cpp-python=={PINNED_VERSION}"
CMAKE_FLAGS = (
    "-DGGML_NATIVE=ON",
    "-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON",  # $ORIGIN-relative RUNPATH: the finished build is moved into place
    "-DLLAMA_CURL=OFF",
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
)
# -march=native turns on Intel AMX where the CPU has it, and ggml then runs its AMX q8_0/q4 kernels; where the
# kernel or hypervisor does not grant a process the AMX tile state, the first `tilezero` is SIGILL (seen on this
# project's CI hosts: "trap invalid opcode … in libggml-cpu.so", every q8_0 model). The build leaves AMX out on
# x86; the vector (AVX-512/AVX2) kernels serve those types instead.
NO_AMX = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
PERCENT = re.compile(r"^\[\s*(\d+)%\]")


def cuda_architecture(run: Callable[[list[str]], str] | None = None) -> str:
    """The first GPU's compute capability as CMake wants it ("89" for 8.9), from nvidia-smi."""
    run = run or _run_text
    try:
        caps = run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"]).split()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise DeviceError(
            f"--cuda needs an NVIDIA GPU, but nvidia-smi failed ({exc}); build without --cuda"
        ) from exc
    if not caps or not re.fullmatch(r"\d+\.\d+", caps[0]):
        raise DeviceError(f"nvidia-smi reported no compute capability ({caps!r}); build without --cuda")
    return caps[0].replace(".", "")


def build_key(cuda_arch: str | None) -> str:
    """Cache folder name: <version>-cpu or <version>-cuda-sm<arch>, `-noamx` where the build leaves AMX out (so a
    cached build from before, with AMX, is not reused)."""
    key = f"{PINNED_VERSION}-cuda-sm{cuda_arch}" if cuda_arch else f"{PINNED_VERSION}-cpu"
    return key + "-noamx" if _x86() else key


def cmake_configure_argv(src: Path, build: Path, cuda_arch: str | None) -> list[str]:
    cuda = ["-DGGML_CUDA=ON", f"-DCMAKE_CUDA_ARCHITECTURES={cuda_arch}"] if cuda_arch else []
    no_amx = [f"-DCMAKE_C_FLAGS={NO_AMX}", f"-DCMAKE_CXX_FLAGS={NO_AMX}"] if _x86() else []
    return ["cmake", "-S", str(src), "-B", str(build), *CMAKE_FLAGS, *no_amx, *cuda]


def _x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


def cmake_build_argv(build: Path, jobs: int) -> list[str]:
    return ["cmake", "--build", str(build), "-j", str(jobs), "--target", BINARY]


def install_llama_cpp(
    *, cuda: bool = False, progress: Callable[[str], None] = lambda _: None, cache_dir: Path | None = None
) -> LlamaServerBinary:
    """Build llama-server (or find the cached build) in cache_dir()/llama.cpp/<key>/build/bin/.

    cmake works in build.partial/, renamed to build/ only once the binary it made runs, so an interrupted build is
    never taken for a finished one; a later install resumes it. The build's RUNPATH is relative ($ORIGIN), so the
    binary still finds its libraries after the rename."""
    arch = cuda_architecture() if cuda else None
    root = (cache_dir or paths.cache_dir()) / "llama.cpp" / build_key(arch)
    binary = root / "build" / "bin" / BINARY
    staging = root / "build.partial"
    if binary.is_file():
        try:
            version = check_llama_server(binary)
        except EngineError:  # a link cut short or a library gone: cmake resumes the build where it was made
            progress(f"the cached {binary} does not run; building it again")
            shutil.rmtree(staging, ignore_errors=True)
            os.replace(root / "build", staging)
        else:
            progress(f"llama-server already built in {root}")
            return LlamaServerBinary(binary, version, "cache")
    src = _fetch_sources(root, progress)
    progress("configuring with cmake" + (f" (CUDA sm_{arch})" if arch else " (CPU)"))
    _run_logged(cmake_configure_argv(src, staging, arch), root / "cmake.log", progress)
    jobs = os.cpu_count() or 2
    progress(
        f"compiling llama-server with {jobs} jobs (about 5 minutes on 2 cores for CPU; CUDA takes longer)"
    )
    _run_logged(cmake_build_argv(staging, jobs), root / "cmake.log", progress)
    check_llama_server(staging / "bin" / BINARY)  # it runs where it was built before it is moved into place
    shutil.rmtree(root / "build", ignore_errors=True)
    os.replace(staging, root / "build")
    return LlamaServerBinary(binary, check_llama_server(binary), "build")


def _fetch_sources(root: Path, progress: Callable[[str], None]) -> Path:
    """dl/<sdist>.tar.gz from PyPI, extracted (first folder stripped) into src/; returns the llama.cpp folder.

    Each step works in a staging folder (dl.partial/, src.partial/) that is renamed into place only once it is
    complete, so an install interrupted anywhere (Ctrl-C, a full disk, a truncated download) leaves nothing a
    later install would take for finished: it starts that step again."""
    src = root / "src"
    vendored = src / "vendor" / "llama.cpp"
    if (vendored / "CMakeLists.txt").is_file():
        return vendored
    dl = root / "dl"
    if not list(dl.glob("*.tar.gz")):
        staging = root / "dl.partial"
        shutil.rmtree(staging, ignore_errors=True)
        progress(f"downloading the {SDIST} source distribution from PyPI (~77 MB; it vendors llama.cpp)")
        argv = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-binary",
            ":all:",
            "--no-deps",
            SDIST,
            "-d",
            str(staging),
        ]
        _run_logged(argv, root / "dl.log", progress)
        shutil.rmtree(dl, ignore_errors=True)
        os.replace(staging, dl)
    progress(f"extracting into {src}")
    staging = root / "src.partial"
    shutil.rmtree(staging, ignore_errors=True)  # left by an interrupted extraction: never reused
    try:
        _extract_stripped(next(iter(dl.glob("*.tar.gz"))), staging)
    except (tarfile.TarError, EOFError, zlib.error) as exc:  # a damaged download: fetch it again next time
        shutil.rmtree(dl, ignore_errors=True)
        raise EngineError(f"the downloaded {SDIST} source is damaged ({exc}); run the install again") from exc
    shutil.rmtree(src, ignore_errors=True)
    os.replace(staging, src)
    return vendored


def _extract_stripped(tarball: Path, dest: Path) -> None:
    with tarfile.open(tarball) as tar:
        members = []
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if len(parts) > 1:
                member.name = str(Path(*parts[1:]))
                members.append(member)
        tar.extractall(dest, members=members, filter="data")


def _run_logged(argv: list[str], log_path: Path, progress: Callable[[str], None]) -> None:
    """Run a build step, appending its output to ``log_path`` and reporting build percentages."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    last = None
    try:
        with (
            open(log_path, "a", encoding="utf-8") as log,
            subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
            ) as proc,
        ):
            for line in proc.stdout or ():
                log.write(line)
                match = PERCENT.match(line)
                if match and match.group(1) != last:
                    last = match.group(1)
                    progress(line.strip())
    except OSError as exc:
        raise EngineError(f"cannot run {argv[0]} ({exc.strerror or exc}); install it and retry") from exc
    if proc.returncode != 0:
        tail = read_log_tail(log_path, 20)
        raise EngineError(f"`{' '.join(argv[:3])} …` failed: {telling_line(tail)} (log: {log_path})")


def _run_text(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=VERSION_TIMEOUT_S).stdout
