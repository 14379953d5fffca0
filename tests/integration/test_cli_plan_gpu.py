"""`servelab plan --gpu auto` (NVML through a recorded probe: no GPU here) and the card overrides' refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.cli.app import main
from servelab.diagnose import probe as probe_module
from servelab.diagnose.probe import RecordedProbe

FIXTURES = Path(__file__).parent.parent / "fixtures" / "doctor"
PLAN = ["plan", "Qwen/Qwen3-8B", "--engine", "vllm", "--quant", "bf16", "--context", "8192", "--json"]


class _Recorded(RecordedProbe):
    """The recorded machine where `--gpu auto` opens the real one (a context manager, like RealProbe)."""

    fixture = FIXTURES / "no-gpu"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(self.fixture)

    def __enter__(self) -> _Recorded:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


@pytest.fixture
def machine(monkeypatch):
    def use(name: str) -> None:
        monkeypatch.setattr(_Recorded, "fixture", FIXTURES / name)
        monkeypatch.setattr(probe_module, "RealProbe", _Recorded)

    return use


def test_auto_plans_the_two_h100_it_finds(machine, capsys) -> None:
    machine("two-h100-sxm")
    assert main([*PLAN[:2], "--gpu", "auto", *PLAN[2:]]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert (doc["gpu"], doc["gpus"]) == ("h100-sxm", 2)
    plan = doc["plans"][0]
    assert plan["tensor_parallel"] == 2 and plan["memory_bytes"]["capacity"] == 81559 * 1024**2
    assert err == "--gpu auto: 2 x NVIDIA H100 80GB HBM3, 81,559 MiB = h100-sxm\n"


def test_auto_takes_fewer_gpus_but_not_more(machine, capsys) -> None:
    machine("two-h100-sxm")
    assert main([*PLAN[:2], "--gpu", "auto", "--gpus", "1", *PLAN[2:]]) == 0
    assert json.loads(capsys.readouterr().out)["plans"][0]["tensor_parallel"] == 1
    assert main([*PLAN[:2], "--gpu", "auto", "--gpus", "4", *PLAN[2:]]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--gpus 4, but --gpu auto found 2" in err and err.count("\n") == 1


def test_auto_on_an_uncatalogued_card_needs_its_bandwidth(machine, capsys) -> None:
    machine("one-a10-uncatalogued")
    assert main([*PLAN[:2], "--gpu", "auto", *PLAN[2:]]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "give --bandwidth GB/s" in err
    assert main([*PLAN[:2], "--gpu", "auto", "--bandwidth", "600", *PLAN[2:]]) == 0
    out, err = capsys.readouterr()
    plan = json.loads(out)["plans"][0]
    assert plan["memory_bytes"]["capacity"] == 22731 * 1024**2
    assert "NVIDIA A10" in err and "not in the catalog" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--vram", "40"], "--vram without --gpu: give --gpu NAME (the card to resize) or --bandwidth GB/s"),
        (["--bandwidth", "900"], "--bandwidth without --gpu"),
        (["--tflops", "300"], "--tflops without --gpu"),
    ],
)
def test_an_override_alone_does_not_resize_a_default_card(flags: list[str], needle: str, capsys) -> None:
    assert main(["plan", "Qwen/Qwen3-8B", *flags]) == 2
    out, err = capsys.readouterr()
    assert out == "" and needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_an_override_with_a_named_card_resizes_it(capsys) -> None:
    assert main([*PLAN[:2], "--gpu", "rtx4090", "--vram", "40", *PLAN[2:]]) == 0
    assert json.loads(capsys.readouterr().out)["plans"][0]["memory_bytes"]["capacity"] == 40 * 1024**3
