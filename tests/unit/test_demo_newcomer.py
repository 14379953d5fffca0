"""The demo for a newcomer (issue 24 item 6): the verify line names only what the server reports (vLLM has no
slots), memory used is the server's peak resident memory, the levels are long enough for a p99."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from servelab.demo import DemoConfig, reported_line
from servelab.demo_summary import with_memory
from servelab.engines.process import group_resident_peak_bytes
from servelab.report import assemble
from servelab.results.configs import EffectiveConfig
from servelab.store import Store
from tests.runs_factory import store_run


def test_the_verify_line_names_only_what_the_server_reports() -> None:
    vllm = EffectiveConfig(
        engine="vllm", context_per_slot=16384, max_total_tokens=152_096, kv_cache_dtype="auto"
    )
    assert reported_line(vllm) == "context per request 16384, KV pool 152,096 tokens, KV cache auto"
    llama = EffectiveConfig(engine="llamacpp", context_per_slot=16384, slots=4)
    assert reported_line(llama) == "context per request 16384, slots 4"
    assert "None" not in reported_line(EffectiveConfig(engine="vllm"))


def test_a_process_groups_peak_resident_memory_is_summed_over_its_processes() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; b = bytearray(64 << 20); time.sleep(30)"], process_group=0
    )
    try:
        deadline = time.monotonic() + 10
        while (peak := group_resident_peak_bytes(child.pid) or 0) < 64 << 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert peak >= 64 << 20  # the 64 MiB it holds
        assert group_resident_peak_bytes(child.pid, Path("/nonexistent")) is None
    finally:
        child.kill()
        child.wait()
    assert group_resident_peak_bytes(child.pid) is None  # gone


def test_the_bill_takes_memory_used_from_the_servers_resident_peak(tmp_path: Path) -> None:
    run = store_run(tmp_path / "r.db")
    with Store.open(tmp_path / "r.db") as store:
        bill = assemble([store.load_run(run)])
    assert bill.engines[0].memory_used_bytes is None  # a CPU engine records no GPU memory
    assert with_memory(bill, {run: 123 << 20}).engines[0].memory_used_bytes == 123 << 20
    assert with_memory(bill, {"other": 1}).engines[0].memory_used_bytes is None


def test_demo_levels_are_long_enough_for_a_p99() -> None:
    assert DemoConfig(workdir=Path(".")).requests_per_level >= 100
