"""`Probe`: every question doctor asks the machine, behind one small interface.

`RealProbe` answers from NVML (nvidia-ml-py, imported as ``pynvml``), subprocesses and files; `RecordedProbe`
replays a fixture directory (``nvml.json``, ``commands.json``, ``files.json``, ``env.json``) so the rules that
turn answers into findings are pure and testable without a GPU. A query the hardware or driver cannot answer
returns None, never raises.
"""

from __future__ import annotations

import contextlib
import fnmatch
import glob as globlib
import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from servelab.errors import ConfigError

GPU_QUERIES = (
    "name",
    "uuid",
    "bus_id",
    "memory_total_bytes",
    "driver_version",
    "cuda_driver_version",
    "power_limit_mw",
    "power_default_limit_mw",
    "power_usage_mw",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "max_sm_clock_mhz",
    "max_mem_clock_mhz",
    "pcie_gen_current",
    "pcie_gen_max",
    "pcie_width_current",
    "pcie_width_max",
    "virtualization_mode",
    "nvlink_active_links",
    "sm_util_pct",
    "mem_util_pct",
    "memory_used_bytes",
)
PAIR_QUERIES = ("p2p_read", "p2p_write", "p2p_nvlink", "common_ancestor")


@dataclass(frozen=True)
class CommandOutput:
    returncode: int
    stdout: str


class Probe(Protocol):
    def nvml_error(self) -> str | None: ...
    def gpu_count(self) -> int: ...
    def gpu(self, index: int, query: str) -> Any: ...
    def pair(self, a: int, b: int, query: str) -> int | None: ...
    def run(self, argv: Sequence[str]) -> CommandOutput | None: ...
    def read_text(self, path: str) -> str | None: ...
    def glob(self, pattern: str) -> list[str]: ...
    def environ(self) -> Mapping[str, str]: ...


def _check_query(query: str, known: tuple[str, ...]) -> None:
    if query not in known:
        raise ValueError(f"unknown probe query {query!r}; known: {', '.join(known)}")


class RealProbe:
    """This machine. ``root`` prefixes absolute system paths (tests point it at a temporary tree)."""

    def __init__(self, root: str = "/", command_timeout_s: float = 20.0) -> None:
        self._root = root
        self._timeout_s = command_timeout_s
        self._nvml: Any = None
        self._nvml_error: str | None = None
        self._started = False

    def __enter__(self) -> RealProbe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._nvml is not None:
            with contextlib.suppress(Exception):  # a broken driver at shutdown must not mask the result
                self._nvml.nvmlShutdown()
            self._nvml = None

    def _start(self) -> None:
        if self._started:
            return
        self._started = True
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
        except ImportError as exc:
            self._nvml_error = f"nvidia-ml-py is not installed ({exc})"
        except Exception as exc:  # pynvml.NVMLError and its many subclasses
            self._nvml_error = str(exc) or type(exc).__name__

    def nvml_error(self) -> str | None:
        self._start()
        return self._nvml_error

    def gpu_count(self) -> int:
        self._start()
        return 0 if self._nvml is None else int(self._nvml.nvmlDeviceGetCount())

    def gpu(self, index: int, query: str) -> Any:
        _check_query(query, GPU_QUERIES)
        self._start()
        if self._nvml is None:
            return None
        from servelab.diagnose import nvml_queries

        return nvml_queries.gpu_query(self._nvml, index, query)

    def pair(self, a: int, b: int, query: str) -> int | None:
        _check_query(query, PAIR_QUERIES)
        self._start()
        if self._nvml is None:
            return None
        from servelab.diagnose import nvml_queries

        return nvml_queries.pair_query(self._nvml, a, b, query)

    def run(self, argv: Sequence[str]) -> CommandOutput | None:
        try:
            done = subprocess.run(
                list(argv), capture_output=True, text=True, timeout=self._timeout_s, check=False
            )
        except (FileNotFoundError, PermissionError):
            return None
        except subprocess.TimeoutExpired:
            return CommandOutput(returncode=124, stdout="")
        return CommandOutput(returncode=done.returncode, stdout=done.stdout)

    def _path(self, path: str) -> str:
        return str(Path(self._root) / path.lstrip("/")) if path.startswith("/") else path

    def read_text(self, path: str) -> str | None:
        try:
            return Path(self._path(path)).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    def glob(self, pattern: str) -> list[str]:
        """Matching paths, as this machine names them (without ``root``)."""
        found = globlib.glob(self._path(pattern))
        if self._root == "/" or not pattern.startswith("/"):
            return sorted(found)
        root = str(Path(self._root))
        return sorted("/" + str(Path(path).relative_to(root)) for path in found)

    def environ(self) -> Mapping[str, str]:
        return dict(os.environ)


class RecordedProbe:
    """Replays a fixture directory recorded from a real machine (see tests/fixtures/doctor/*/SOURCE.md)."""

    def __init__(self, directory: Path | str) -> None:
        self._dir = Path(directory)
        if not self._dir.is_dir():
            raise ConfigError(f"no recorded probe at {self._dir}: give a fixture directory")
        self._nvml = self._json("nvml.json", {"error": "no nvml.json recorded"})
        self._commands = self._json("commands.json", {})
        self._files = self._json("files.json", {})
        self._env = self._json("env.json", {})
        gpus, pairs = self._nvml.get("gpus", []), self._nvml.get("pairs", {})
        if not (
            isinstance(gpus, list) and all(isinstance(g, dict) for g in gpus) and isinstance(pairs, dict)
        ):
            raise ConfigError(
                f"recorded probe {self._dir / 'nvml.json'}: 'gpus' must be a list of objects, 'pairs' an object"
            )

    def _json(self, name: str, default: dict[str, Any]) -> dict[str, Any]:
        path = self._dir / name
        if not path.exists():
            return default
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"recorded probe {path}: not a readable JSON file ({exc})") from exc
        if not isinstance(value, dict):
            raise ConfigError(
                f"recorded probe {path}: expected a JSON object, as `servelab doctor --record` writes"
            )
        return value

    def nvml_error(self) -> str | None:
        return self._nvml.get("error")

    def gpu_count(self) -> int:
        return len(self._nvml.get("gpus", []))

    def gpu(self, index: int, query: str) -> Any:
        _check_query(query, GPU_QUERIES)
        return self._nvml["gpus"][index].get(query)

    def pair(self, a: int, b: int, query: str) -> int | None:
        _check_query(query, PAIR_QUERIES)
        return self._nvml.get("pairs", {}).get(f"{a}-{b}", {}).get(query)

    def run(self, argv: Sequence[str]) -> CommandOutput | None:
        entry = self._commands.get(" ".join(argv))
        if entry is None:
            return None
        stdout = entry.get("stdout", "")
        if "stdout_file" in entry:
            stdout = (self._dir / entry["stdout_file"]).read_text(encoding="utf-8")
        return CommandOutput(returncode=int(entry.get("rc", 0)), stdout=stdout)

    def read_text(self, path: str) -> str | None:
        return self._files.get(path)

    def glob(self, pattern: str) -> list[str]:
        return sorted(p for p in self._files if fnmatch.fnmatch(p, pattern))

    def environ(self) -> Mapping[str, str]:
        return dict(self._env)


class RecordingProbe:
    """Wraps a probe and remembers every answer; `save(directory)` writes a `RecordedProbe` fixture.

    Environment variables are saved only by name and value for NCCL_*, CUDA_*, VLLM_*, SGLANG_*, HOME and
    XDG_CACHE_HOME (nothing else — API keys and tokens never reach a fixture).
    """

    ENV_PREFIXES = ("NCCL_", "CUDA_", "VLLM_", "SGLANG_")
    ENV_NAMES = ("HOME", "XDG_CACHE_HOME")

    def __init__(self, inner: Probe) -> None:
        self._inner = inner
        self._nvml: dict[str, Any] = {"gpus": [], "pairs": {}}
        self._commands: dict[str, Any] = {}
        self._files: dict[str, str] = {}

    def nvml_error(self) -> str | None:
        error = self._inner.nvml_error()
        if error is not None:
            self._nvml["error"] = error
        return error

    def gpu_count(self) -> int:
        count = self._inner.gpu_count()
        while len(self._nvml["gpus"]) < count:
            self._nvml["gpus"].append({})
        return count

    def gpu(self, index: int, query: str) -> Any:
        answer = self._inner.gpu(index, query)
        self.gpu_count()
        if (
            query not in ("power_usage_mw", "sm_util_pct", "mem_util_pct", "memory_used_bytes")
            or query not in self._nvml["gpus"][index]
        ):
            self._nvml["gpus"][index][query] = answer
        return answer

    def pair(self, a: int, b: int, query: str) -> int | None:
        answer = self._inner.pair(a, b, query)
        self._nvml["pairs"].setdefault(f"{a}-{b}", {})[query] = answer
        return answer

    def run(self, argv: Sequence[str]) -> CommandOutput | None:
        output = self._inner.run(argv)
        if output is not None:
            self._commands[" ".join(argv)] = {"stdout": output.stdout, "rc": output.returncode}
        return output

    def read_text(self, path: str) -> str | None:
        text = self._inner.read_text(path)
        if text is not None:
            self._files[path] = _flags_only(text) if path == "/proc/cpuinfo" else text
        return text

    def glob(self, pattern: str) -> list[str]:
        paths = self._inner.glob(pattern)
        for path in paths:
            self.read_text(path)
        return paths

    def environ(self) -> Mapping[str, str]:
        return self._inner.environ()

    def _safe_env(self) -> dict[str, str]:
        env = self._inner.environ()
        return {k: v for k, v in env.items() if k.startswith(self.ENV_PREFIXES) or k in self.ENV_NAMES}

    def save(self, directory: Path | str) -> Path:
        """Write nvml.json, commands.json, files.json and env.json into `directory` (created)."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        for name, value in (
            ("nvml", self._nvml),
            ("commands", self._commands),
            ("files", self._files),
            ("env", self._safe_env()),
        ):
            (out / f"{name}.json").write_text(
                json.dumps(value, indent=2, sort_keys=True) + "\n", encoding="utf-8"
            )
        return out


def _flags_only(cpuinfo: str) -> str:
    """The first `flags` line of /proc/cpuinfo: all doctor reads, and far smaller than the file."""
    flags = next((line for line in cpuinfo.splitlines() if line.startswith("flags")), "")
    return flags + "\n" if flags else ""
