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


def test_auto_plans_the_gh200_it_finds_with_its_hbm_not_its_cpu_memory(machine, capsys) -> None:
    machine("one-gh200")
    assert main([*PLAN[:2], "--gpu", "auto", *PLAN[2:]]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert (doc["gpu"], doc["gpus"]) == ("gh200", 1)
    assert doc["plans"][0]["memory_bytes"]["capacity"] == 97871 * 1024**2
    assert err == "--gpu auto: 1 x NVIDIA GH200 480GB, 97,871 MiB = gh200\n"


@pytest.mark.parametrize("card", ["l20", "gh200", "gb10"])
def test_plan_on_a_new_catalog_card(card: str, capsys) -> None:
    from servelab.hardware.gpus import find_gpu

    assert main([*PLAN[:2], "--gpu", card, *PLAN[2:]]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    plan = doc["plans"][0]
    gpu = find_gpu(card)
    assert doc["gpu"] == card and plan["fits"] is True and err == ""
    assert plan["memory_bytes"]["capacity"] == gpu.memory_bytes
    # decode is memory-bound for an 8B model at batch 1: the ceiling scales with the card's bandwidth
    assert plan["decode_ceiling_tok_s"]["bound"] == "memory"


def test_the_new_cards_decode_ceilings_follow_their_catalog_bandwidth(capsys) -> None:
    from servelab.hardware.gpus import find_gpu

    per_gb_s = []
    for card in ("l20", "gh200", "gb10"):
        assert main([*PLAN[:2], "--gpu", card, *PLAN[2:]]) == 0
        ceiling = json.loads(capsys.readouterr().out)["plans"][0]["decode_ceiling_tok_s"]["short"]
        per_gb_s.append(ceiling / find_gpu(card).bandwidth_gb_s)
    assert max(per_gb_s) == pytest.approx(min(per_gb_s), rel=0.01)


def test_the_gb10_is_planned_for_vllm_unlike_apple_unified_memory(capsys) -> None:
    assert main(["plan", "Qwen/Qwen3-8B", "--gpu", "m4-max", "--engine", "vllm", "--quant", "bf16"]) == 2
    assert "needs a CUDA or ROCm GPU" in capsys.readouterr().err
    assert main([*PLAN[:2], "--gpu", "gb10", *PLAN[2:]]) == 0
    assert json.loads(capsys.readouterr().out)["plans"][0]["engine"] == "vllm"


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
