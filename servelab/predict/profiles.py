"""Calibration profiles: the fitted `AchievedRates` of one machine x engine x weight format, kept as one JSON file
each in the user config dir (`<config>/calibration/`, servelab/paths.py).

The machine is the GPU's catalog name, or for the CPU device (`--gpu cpu`) its key in servelab/hardware/cpu.py
(model | memory | cores): a profile made on one host is not used on another. `plan` and `predict` look a
profile up by (machine, engine, format) and say which one they use.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from servelab import paths
from servelab.errors import ConfigError
from servelab.hardware.gpus import GPU
from servelab.predict.roofline import AchievedRates, Roofline
from servelab.scheduling.core import Request, Sequence, Step, Work

SCHEMA = 1
FOLDER = "calibration"


@dataclass(frozen=True, kw_only=True)
class Profile:
    machine: str  # machine_key(gpu)
    machine_label: str
    engine: str
    quant: str
    rates: AchievedRates
    created: str  # ISO date and time (UTC)
    runs: tuple[str, ...]
    model: str
    fit: dict[str, Any]  # r2, rms_relative, median_relative, intervals, levels
    engine_version: str | None = (
        None  # the release the runs measured, as the server reported it (None: unknown)
    )

    @property
    def name(self) -> str:
        return f"{self.engine}/{self.quant} on {self.machine_label}"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["runs"] = list(self.runs)
        data["effective"] = data.pop("rates")  # the file's key since schema 1
        return {"schema": SCHEMA, **data}


def machine_key(gpu: GPU) -> str:
    """The GPU's name, or `cpu:` and this host's CPU key."""
    return f"cpu:{gpu.cpu.key}" if gpu.cpu is not None else gpu.name


def profile_dir() -> Path:
    return paths.config_dir() / FOLDER


def _file_name(machine: str, engine: str, quant: str) -> str:
    readable = re.sub(r"[^a-z0-9]+", "-", f"{engine}-{quant}-{machine.split('|')[0]}".lower()).strip("-")
    digest = hashlib.sha256(f"{machine}\0{engine}\0{quant.lower()}".encode()).hexdigest()[:10]
    return f"{readable[:60]}-{digest}.json"


def save_profile(profile: Profile, folder: Path | None = None) -> Path:
    folder = folder or profile_dir()
    path = folder / _file_name(profile.machine, profile.engine, profile.quant)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(profile.to_json(), indent=2) + "\n")
        tmp.replace(path)
    except OSError as exc:
        raise ConfigError(f"cannot write the calibration profile {path}: {exc.strerror or exc}") from exc
    return path


def find_profile(
    gpu: GPU, engine: str, quant: str, folder: Path | None = None
) -> tuple[Profile, Path] | None:
    """The saved profile for this machine x engine x format, or None."""
    path = (folder or profile_dir()) / _file_name(machine_key(gpu), engine, quant)
    if not path.is_file():
        return None
    return read_profile(path), path


def read_profile(path: Path) -> Profile:
    try:
        data = json.loads(path.read_text())
        e = data["effective"]
        batched = e.get("batched_bandwidth_bytes_s")  # profiles before it was fitted have none
        prefill = e.get("prefill_flops_s")  # nor this one
        rates = AchievedRates(
            bandwidth_bytes_s=float(e["bandwidth_bytes_s"]),
            flops_s=float(e["flops_s"]),
            step_overhead_s=float(e["step_overhead_s"]),
            token_overhead_s=float(e["token_overhead_s"]),
            source="calibration",
            batched_bandwidth_bytes_s=None if batched is None else float(batched),
            prefill_flops_s=None if prefill is None else float(prefill),
        )
        figures = (
            rates.bandwidth_bytes_s,
            rates.flops_s,
            rates.batched_bandwidth_bytes_s or 1,
            rates.prefill_flops_s or 1,
        )
        if min(figures) <= 0:
            raise ValueError("bandwidth and compute must be positive")
        return Profile(
            machine=str(data["machine"]),
            machine_label=str(data["machine_label"]),
            engine=str(data["engine"]),
            quant=str(data["quant"]),
            rates=rates,
            created=str(data["created"]),
            runs=tuple(str(r) for r in data["runs"]),
            model=str(data["model"]),
            fit=dict(data["fit"]),
            engine_version=None if data.get("engine_version") is None else str(data["engine_version"]),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"calibration profile {path} is unreadable ({exc}); run `servelab calibrate` again or delete it"
        ) from exc


def _release_words(version: str) -> list[str]:
    return re.findall(r"[0-9a-z]+", version.lower().removeprefix("v"))


def same_release(a: str, b: str) -> bool:
    """Whether two spellings name one release: the words of one begin the other's ("b4567" and
    "b4567 (1a2b3c)", "0.8.5" and "v0.8.5"), so a build's extra detail does not make it another release."""
    x, y = _release_words(a), _release_words(b)
    n = min(len(x), len(y))
    return n > 0 and x[:n] == y[:n]


def stale_reason(profile: Profile, predicted_version: str | None) -> str | None:
    """Why `profile` may not describe the release predicted: it measured another one. None when they are
    the same, or when either is unknown (nothing to compare)."""
    made = profile.engine_version
    if made is None or predicted_version is None or same_release(made, predicted_version):
        return None
    return (
        f"calibration profile {profile.name} was measured on {profile.engine} {made}, not the {predicted_version}"
        " predicted: its figures may be stale (calibrate again on that release, or --no-calibration)"
    )


def calibrated_speeds(roofline: Roofline, prompt_tokens: int = 1024) -> tuple[float, float]:
    """(single-stream decode tok/s after a `prompt_tokens` prompt, prefill tok/s of that prompt) at the
    roofline's figures: what `servelab plan` says a calibration profile measured."""
    seq, decoding = (
        Sequence(request=Request(0, 0.0, (), 1)),
        Sequence(request=Request(0, 0.0, (), 2), generated=1),
    )
    decode = roofline.step_s(Step(((Work(decoding, 1, prompt_tokens),),)))
    prefill = roofline.step_s(Step(((Work(seq, prompt_tokens, 0),),)))
    return 1 / decode, prompt_tokens / prefill
