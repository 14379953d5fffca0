"""Doctor on recorded machines (tests/fixtures/doctor/<scenario>, provenance in each SOURCE.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from servelab.diagnose.doctor import run_doctor
from servelab.diagnose.probe import RecordedProbe

FIXTURES = Path(__file__).parent.parent / "fixtures" / "doctor"


def doctor(scenario: str, env: dict | None = None, tmp_path: Path | None = None):
    directory = FIXTURES / scenario
    if env is not None:
        directory = tmp_path / scenario
        shutil.copytree(FIXTURES / scenario, directory)
        (directory / "env.json").write_text(json.dumps(env))
    return run_doctor(RecordedProbe(directory))


def ids(report) -> list[tuple[str, str]]:
    return [(f.severity, f.id) for f in report.findings]


def test_kvm_pcie_pair_ranks_blocked_p2p_first_then_vm_then_card_details():
    report = doctor("kvm-2x3090-pcie")
    assert ids(report) == [
        ("critical", "p2p-blocked"),
        ("warning", "virtual-machine"),
        ("warning", "pcie-narrow"),
        ("warning", "pcie-narrow"),
        ("info", "power-capped"),
        ("info", "power-capped"),
    ]
    blocked = report.findings[0]
    assert "chipset_not_supported" in blocked.evidence and "topo -p2p r: CNS" in blocked.evidence
    assert "x-nv-gpudirect-clique" in blocked.fix
    assert "servelab plan … --gpus 1" in blocked.fix and "--tp" not in blocked.fix  # plan has no --tp option
    assert [p.interconnect for p in report.pairs] == ["pcie-host-staged"]
    assert report.virtualization.in_vm and report.virtualization.detect_virt == "kvm"


def test_kvm_gpu_facts_come_from_nvml_and_the_catalog():
    gpu = doctor("kvm-2x3090-pcie").gpus[0]
    assert (gpu.name, gpu.memory_total_mib, gpu.driver_version) == (
        "NVIDIA GeForce RTX 3090",
        24576,
        "595.71.05",
    )
    assert (gpu.power_limit_w, gpu.power_default_limit_w) == (290.0, 350.0)
    assert (gpu.pcie_width_current, gpu.pcie_width_max, gpu.pcie_gen_current) == (8, 16, None)
    assert gpu.catalog_name == "rtx3090" and gpu.bandwidth_gb_s == 936


def test_nvlink_pair_is_healthy_and_says_so():
    report = doctor("nvlink-2x3090")
    assert ids(report) == [("info", "nvlink"), ("info", "container")]
    (pair,) = report.pairs
    assert (pair.interconnect, pair.nvlink_links, pair.topo_link, pair.p2p_read) == ("nvlink", 4, "NV4", "ok")


def test_nccl_p2p_disable_on_the_nvlink_pair_is_the_top_critical(tmp_path):
    report = doctor("nvlink-2x3090", env={"HOME": "/root", "NCCL_P2P_DISABLE": "1"}, tmp_path=tmp_path)
    first = report.findings[0]
    assert (first.severity, first.id) == ("critical", "env-nccl-p2p-disable")
    assert (
        "GPU0↔GPU1 nvlink unused" in first.title and first.evidence == "NCCL_P2P_DISABLE=1 (from environment)"
    )


def test_same_variable_on_one_gpu_is_only_a_note(tmp_path):
    report = doctor("one-gpu-3090", env={"HOME": "/root", "NCCL_P2P_DISABLE": "1"}, tmp_path=tmp_path)
    assert ids(report) == [("info", "container"), ("info", "env-nccl-p2p-disable")]
    assert report.pairs == ()


def test_one_gpu_has_no_pairs_and_no_problems():
    report = doctor("one-gpu-3090")
    assert ids(report) == [("info", "container")]
    assert len(report.gpus) == 1 and report.gpus[0].bus_id == "00000000:65:00.0"


def test_no_gpu_says_so_and_still_checks_virtualisation():
    report = doctor("no-gpu")
    assert ids(report)[0] == ("info", "no-gpu")
    assert "NVML Shared Library Not Found" in report.findings[0].evidence
    assert ("info", "container") in ids(report) and report.gpus == () and report.pairs == ()
    assert all(f.severity == "info" for f in report.findings)


@pytest.mark.parametrize("scenario", ["kvm-2x3090-pcie", "nvlink-2x3090", "one-gpu-3090", "no-gpu"])
def test_json_document_has_the_interface_keys(scenario):
    doc = json.loads(json.dumps(doctor(scenario).to_json()))
    assert {"gpus", "pairs", "findings"} <= set(doc)
    for finding in doc["findings"]:
        assert set(finding) == {"id", "severity", "title", "evidence", "consequence", "fix"}
    for pair in doc["pairs"]:
        assert pair["interconnect"] in ("nvlink", "pcie-p2p", "pcie-host-staged", None)


def test_pcie_generation_read_during_the_burn_is_judged_under_load():
    from servelab.diagnose.burn import BurnResult

    burn = BurnResult(
        status="ok",
        backend="torch",
        gpu=1,
        seconds=20,
        iterations=100,
        tflops=70.0,
        power_w=285.0,
        pcie_gen_under_load=1,
        pcie_width_under_load=8,
    )
    report = run_doctor(RecordedProbe(FIXTURES / "kvm-2x3090-pcie"), burn=burn)
    gen = [f for f in report.findings if f.id == "pcie-gen-low"]
    assert [(f.severity, f.title) for f in gen] == [
        ("warning", "GPU1 PCIe link runs at gen 1 under load (max gen 4)")
    ]
    assert ("info", "burn") in ids(report)


def test_bare_metal_geforce_refusal_is_a_warning_with_its_cause():
    from servelab.diagnose.pairs import PairInfo, pair_findings

    (finding,) = pair_findings(
        [
            PairInfo(
                gpu_a=0,
                gpu_b=1,
                p2p_read="gpu_not_supported",
                p2p_write="gpu_not_supported",
                common_ancestor="PHB",
                topo_p2p_read="GNS",
            )
        ],
        in_vm=False,
    )
    assert finding.severity == "warning" and finding.fix.startswith("GNS: the stock driver refuses P2P")
    assert "x-nv-gpudirect-clique" not in finding.fix and "path PHB" in finding.evidence
