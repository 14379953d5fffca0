"""The burn's and the real P2P test's paths that run without a GPU: skipped with a reason, never a crash."""

from __future__ import annotations

from pathlib import Path

from servelab.diagnose.burn import BurnResult, burn_finding, find_backend, run_burn
from servelab.diagnose.p2ptest import P2PTestResult, p2p_test_findings, run_p2p_test, skip_reason
from servelab.diagnose.probe import RecordedProbe

FIXTURES = Path(__file__).parent.parent / "fixtures" / "doctor"


def test_no_backend_means_a_skipped_burn_and_an_info_finding():
    assert find_backend(("servelab_no_such_backend",)) is None
    result = run_burn(RecordedProbe(FIXTURES / "nvlink-2x3090"), backends=("servelab_no_such_backend",))
    assert (result.status, result.reason) == ("skipped", "neither torch nor cupy is installed")
    finding = burn_finding(result)
    assert (finding.id, finding.severity) == ("burn-skipped", "info") and "pip install torch" in finding.fix


def test_backend_present_but_no_gpu_is_skipped_before_touching_cuda():
    result = run_burn(RecordedProbe(FIXTURES / "no-gpu"), backends=("json",))  # any importable module
    assert result.status == "skipped" and "no NVIDIA GPU 0" in result.reason


def test_finished_burn_is_reported_with_its_numbers():
    result = BurnResult(
        status="ok",
        backend="torch",
        gpu=0,
        size=16384,
        seconds=20.0,
        iterations=800,
        tflops=351.8,
        power_w=441.0,
        max_power_w=452.0,
        power_limit_w=450.0,
        samples=100,
    )
    finding = burn_finding(result)
    assert finding.title == "GPU0 at full FP16 compute: 351.8 TFLOPS, 441 W (98% of the 450 W limit)"
    assert "800 iterations in 20.0 s" in finding.evidence


def test_p2p_test_skips_with_the_reason():
    assert skip_reason(1) is not None
    (result,) = run_p2p_test(gpu_count=0)
    assert result.status == "skipped" and result.detail
    (finding,) = p2p_test_findings([result])
    assert (finding.id, finding.severity) == ("p2p-test-skipped", "info")


def test_failed_p2p_copy_is_critical():
    findings = p2p_test_findings(
        [P2PTestResult(0, 1, "failed", "consumer timed out (P2P hang?)"), P2PTestResult(1, 0, "ok")]
    )
    assert [(f.id, f.severity) for f in findings] == [
        ("p2p-test-failed", "critical"),
        ("p2p-test-ok", "info"),
    ]
    assert "GPU0→GPU1: consumer timed out" in findings[0].evidence
