"""Environment and file checks through the real probe: monkeypatched variables, files in a temporary root."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.diagnose.environment import environment_findings, nccl_settings, parse_nccl_conf
from servelab.diagnose.gpus import GpuInfo
from servelab.diagnose.pairs import PairInfo
from servelab.diagnose.probe import RealProbe

RTX = [GpuInfo(index=0, name="NVIDIA GeForce RTX 3090"), GpuInfo(index=1, name="NVIDIA GeForce RTX 3090")]
P2P_PHB = [PairInfo(gpu_a=0, gpu_b=1, p2p_read="ok", p2p_write="ok", common_ancestor="PHB")]
STAGED = [PairInfo(gpu_a=0, gpu_b=1, p2p_read="chipset_not_supported", p2p_write="chipset_not_supported")]
NVLINK = [
    PairInfo(
        gpu_a=0, gpu_b=1, p2p_read="ok", p2p_write="ok", p2p_nvlink="ok", nvlink_links=4, topo_link="NV4"
    )
]
VARIABLES = (
    "NCCL_P2P_DISABLE",
    "NCCL_P2P_LEVEL",
    "NCCL_SHM_DISABLE",
    "NCCL_IB_DISABLE",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "VLLM_SKIP_P2P_CHECK",
    "SGLANG_SKIP_P2P_CHECK",
    "VLLM_CACHE_ROOT",
    "XDG_CACHE_HOME",
    "NCCL_ALGO",
    "VLLM_DISABLE_PYNCCL",
)


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clean environment with HOME=/home/user, and `tmp_path` standing in for the filesystem root."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", "/home/user")
    (tmp_path / "home" / "user").mkdir(parents=True)
    return tmp_path


def found(root: Path, gpus=RTX, pairs=P2P_PHB) -> dict[str, object]:
    return {f.id: f for f in environment_findings(RealProbe(root=str(root)), gpus, pairs)}


def write(root: Path, path: str, text: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def test_clean_environment_only_notes_nccl_default_level_on_a_phb_p2p_pair(machine):
    assert list(found(machine)) == ["nccl-p2p-level-default"]
    assert found(machine, pairs=NVLINK) == {}


@pytest.mark.parametrize(
    ("pairs", "gpus", "severity"),
    [(P2P_PHB, RTX, "critical"), (NVLINK, RTX, "critical"), (STAGED, RTX, "warning"), ([], RTX[:1], "info")],
)
def test_nccl_p2p_disable_severity_follows_what_it_switches_off(machine, monkeypatch, pairs, gpus, severity):
    monkeypatch.setenv("NCCL_P2P_DISABLE", "1")
    assert found(machine, gpus, pairs)["env-nccl-p2p-disable"].severity == severity


def test_nccl_conf_files_are_read_and_the_environment_wins(machine, monkeypatch):
    write(machine, "/etc/nccl.conf", "# site defaults\nNCCL_P2P_DISABLE=1\nNCCL_SHM_DISABLE = 1\n")
    write(machine, "/home/user/.nccl.conf", "NCCL_P2P_LEVEL=NVL\n")
    settings = nccl_settings(RealProbe(root=str(machine)))
    assert str(settings["NCCL_P2P_DISABLE"]) == "NCCL_P2P_DISABLE=1 (from /etc/nccl.conf)"
    assert settings["NCCL_P2P_LEVEL"].source == "/home/user/.nccl.conf"
    result = found(machine, pairs=STAGED)
    assert "/etc/nccl.conf" in result["env-nccl-p2p-disable"].fix
    assert result["env-nccl-shm-disable"].severity == "warning"  # P2P blocked + SHM off → sockets
    monkeypatch.setenv("NCCL_P2P_DISABLE", "0")
    assert "env-nccl-p2p-disable" not in found(machine)


def test_p2p_level_below_the_pairs_path_is_a_warning(machine, monkeypatch):
    monkeypatch.setenv("NCCL_P2P_LEVEL", "NVL")
    level = found(machine)["env-nccl-p2p-level"]
    assert level.severity == "warning" and "GPU0↔GPU1 (PHB)" in level.title
    monkeypatch.setenv("NCCL_P2P_LEVEL", "SYS")
    assert found(machine)["env-nccl-p2p-level"].severity == "info"
    monkeypatch.setenv("NCCL_P2P_LEVEL", "3")  # legacy integer: PHB
    assert found(machine)["env-nccl-p2p-level"].severity == "info"
    monkeypatch.setenv("NCCL_P2P_LEVEL", "FAST")
    assert "not a level" in found(machine)["env-nccl-p2p-level"].title


def test_cuda_visible_devices_order_and_range(machine, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    assert found(machine)["env-cuda-device-order"].severity == "info"  # identical cards
    mixed = [RTX[0], GpuInfo(index=1, name="NVIDIA GeForce RTX 4090")]
    assert found(machine, gpus=mixed)["env-cuda-device-order"].severity == "warning"
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    assert "env-cuda-device-order" not in found(machine, gpus=mixed)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,2")
    assert found(machine)["env-cuda-visible-range"].severity == "warning"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert found(machine)["env-cuda-visible-empty"].severity == "warning"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1aff65f8-8897-eaee-29e4-6871ef7491a0")
    assert "env-cuda-visible-uuid" in found(machine)


def test_engine_switches(machine, monkeypatch):
    monkeypatch.setenv("SGLANG_SKIP_P2P_CHECK", "1")
    monkeypatch.setenv("VLLM_DISABLE_PYNCCL", "true")
    monkeypatch.setenv("VLLM_SKIP_P2P_CHECK", "0")  # the safe value: no finding
    result = found(machine)
    assert {"env-sglang-skip-p2p-check", "env-vllm-disable-pynccl"} <= set(result)
    assert "env-vllm-skip-p2p-check" not in result


def test_stale_p2p_cache_files(machine, monkeypatch):
    vllm = "/home/user/.cache/vllm/gpu_p2p_access_cache_for_0,1.json"
    write(machine, vllm, json.dumps({"0->1": False, "1->0": False}))
    stale = found(machine)["stale-p2p-cache"]
    assert stale.severity == "warning" and "0->1, 1->0" in stale.title and stale.evidence == vllm
    write(machine, vllm, json.dumps({"0->1": True, "1->0": True}))
    assert found(machine)["p2p-cache"].severity == "info"
    assert "says yes" in found(machine, pairs=STAGED)["stale-p2p-cache"].title
    write(machine, "/home/user/.cache/sglang/gpu_p2p_access_cache_for_0,1.json", "{not json")
    assert "unreadable" in found(machine)["stale-p2p-cache"].title
    monkeypatch.setenv("VLLM_CACHE_ROOT", "/srv/vllm-cache")
    write(machine, "/srv/vllm-cache/gpu_p2p_access_cache_for_2,3.json", json.dumps({"2->3": False}))
    assert any("2->3" in f.title for f in environment_findings(RealProbe(root=str(machine)), RTX, P2P_PHB))


def test_parse_nccl_conf():
    assert parse_nccl_conf("A=1\n# B=2\n\nC = 'x' # note\nnot a setting\n") == {"A": "1", "C": "x"}
