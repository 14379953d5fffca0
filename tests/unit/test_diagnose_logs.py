"""The shipped signature database against the recorded log lines in tests/fixtures/logs (provenance in READMEs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.diagnose.logs import scan_files, scan_lines
from servelab.diagnose.signatures import SEVERITIES, load_signatures, signature_files

FIXTURES = Path(__file__).parent.parent / "fixtures" / "logs"
ALL_SIGNATURES = load_signatures()


def fixture_lines() -> list[str]:
    return [line for path in sorted(FIXTURES.glob("*/*.log")) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("signature", ALL_SIGNATURES, ids=lambda s: s.id)
def test_every_signature_matches_a_recorded_line(signature):
    matching = [line for line in fixture_lines() if signature.match(line) is not None]
    assert matching, f"no fixture line for {signature.id}"


@pytest.mark.parametrize("signature", ALL_SIGNATURES, ids=lambda s: s.id)
def test_every_signature_is_complete(signature):
    assert signature.severity in SEVERITIES
    assert signature.versions_seen and signature.source and signature.meaning and signature.fix
    assert signature.id.split(".")[0] in signature_files()


def test_a_log_mixing_all_engines_yields_each_finding_once(tmp_path):
    mixed = tmp_path / "mixed.log"
    mixed.write_text("\n".join(fixture_lines()) + "\n")
    findings = scan_files([str(mixed)], ALL_SIGNATURES)
    ids = [f.id for f in findings]
    assert len(ids) == len(set(ids))
    assert set(ids) == {s.id for s in ALL_SIGNATURES}


def test_findings_rank_critical_then_warning_then_info():
    findings = scan_files([str(p) for p in sorted(FIXTURES.glob("*/*.log"))], ALL_SIGNATURES)
    ranks = [SEVERITIES.index(f.severity) for f in findings]
    assert ranks == sorted(ranks)
    assert findings[0].severity == "critical" and findings[-1].severity == "info"


def test_first_occurrence_and_count_are_kept():
    log = FIXTURES / "llamacpp" / "llama-server-real-np4-context-shift.log"
    findings = {f.id: f for f in scan_files([str(log)], load_signatures(["llamacpp"]))}
    shift = findings["llamacpp.ctx.shift"]
    assert (shift.line, shift.count) == (11, 2)
    assert "n_discard = 127" in shift.text
    assert "127 old tokens were dropped" in shift.meaning


def test_captures_fill_the_fix():
    line = "srv    load_model: initializing, n_slots = 4, n_ctx_slot = 2048, kv_unified = 'false'"
    (finding,) = scan_lines([line], load_signatures(["llamacpp"]))
    assert finding.captures == {"n_slots": "4", "n_ctx_slot": "2048"}
    assert "Multiply -c by 4" in finding.fix
    assert "only 2048 tokens" in finding.meaning


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("srv load_model: initializing, n_slots = 1, n_ctx_slot = 8192, kv_unified = 'false'", set()),
        ("load_tensors: offloaded 29/29 layers to GPU", set()),
        ("slot release: id 0 | task 3 | stop processing: n_tokens = 40, truncated = 0", set()),
        ("slot get_availabl: id  3 | task -1 | selected slot by LRU, t_last = -1", set()),
        (
            "Using ['CUSTOM', 'PYNCCL'] all-reduce backends (in dispatch order) for group 'tp:0' out of x",
            {"vllm.allreduce.backends"},
        ),
        (
            "Using ['PYNCCL'] all-reduce backends (in dispatch order) for group 'ep:0' out of x",
            {"vllm.allreduce.backends"},
        ),
        (
            "Using ['PYNCCL'] all-reduce backends (in dispatch order) for group 'tp:0' out of x",
            {"vllm.allreduce.pynccl_only"},
        ),
    ],
)
def test_conditions_keep_healthy_lines_quiet(line, expected):
    assert {f.id for f in scan_lines([line], ALL_SIGNATURES)} == expected


def test_engine_filter_keeps_shared_signatures_for_both_engines():
    line = "WARNING Custom allreduce is disabled because your platform lacks GPU P2P capability or P2P test failed."
    for engine in ("vllm", "sglang"):
        assert [f.id for f in scan_lines([line], load_signatures([engine]))] == ["vllm.custom_ar.no_p2p"]
    assert scan_lines([line], load_signatures(["llamacpp"])) == []


SUBJECTS = ("Custom allreduce", "CustomAllReduceV2", "CustomAllreduce", "custom_all_reduce")
PREFIXES = ("", "WARNING 05-02 10:11:12 [custom_all_reduce.py:137] ", "[2025-05-02 10:11:12 TP1] ")
REASONS = {
    "vllm.custom_ar.no_p2p": "is disabled because your platform lacks GPU P2P capability or P2P test failed.",
    "vllm.custom_ar.pcie_only_gt2": "is disabled because it's not supported on more than two PCIe-only GPUs.",
    "vllm.custom_ar.world_size": "is disabled due to an unsupported world size: 3. Supported world sizes: [2, 4].",
    "vllm.custom_ar.spans_nodes": "is disabled because this process group spans across nodes.",
    "vllm.custom_ar.no_library": "is disabled because of missing custom allreduce library",
}


@pytest.mark.parametrize("subject", SUBJECTS)
@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize(("signature_id", "reason"), REASONS.items(), ids=list(REASONS))
def test_all_reduce_lines_are_known_by_the_reason_whatever_the_class_is_called(
    subject, prefix, signature_id, reason
):
    line = f"{prefix}{subject} {reason}"
    assert [f.id for f in scan_lines([line], ALL_SIGNATURES)] == [signature_id]


def test_the_field_reports_first_line_is_recognised():
    line = "CustomAllReduceV2 is disabled because your platform lacks GPU P2P capability or P2P test failed"
    (finding,) = scan_lines([line], load_signatures(["sglang"]))
    assert (finding.id, finding.severity) == ("vllm.custom_ar.no_p2p", "critical")


def test_the_world_size_reason_keeps_its_capture_under_a_renamed_class():
    line = "CustomAllReduceV2 is disabled due to an unsupported world size: 3. Supported world sizes: [2, 4, 6, 8]."
    (finding,) = scan_lines([line], ALL_SIGNATURES)
    assert "Tensor parallelism 3 " in finding.meaning
