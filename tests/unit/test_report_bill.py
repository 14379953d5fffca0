"""The bill's pure layers: figures from records, sections with notes for absent inputs, verdict sentences."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from servelab.errors import ConfigError
from servelab.plan.io import plan_document
from servelab.report import assemble, render_report
from servelab.report.levels import level_figures, request_figures
from servelab.report.markdown import md_text
from servelab.report.page import Para, build_page
from servelab.report.verdict import verdicts
from servelab.results.level_key import Level
from servelab.store import Store
from tests.runs_factory import MS, make_record, store_run

GIB = 1024**3
PLAN = {
    "model": "tiny",
    "gpu": "rtx4090-48g",
    "plans": [
        {
            "engine": "sglang",
            "quant": "awq",
            "context": 8192,
            "fits": False,
            "memory_bytes": {"total": 99 * GIB},
            "decode_ceiling_tok_s": {"short": 1.0, "full_context": 1.0},
        },
        {
            "engine": "llamacpp",
            "quant": "q8_0",
            "context": 4096,
            "fits": True,
            "memory_bytes": {
                "weights": 2 * GIB,
                "kv_cache": GIB,
                "recurrent_state": 0,
                "activations": 0,
                "runtime": GIB,
                "total": 4 * GIB,
                "capacity": 8 * GIB,
            },
            "decode_ceiling_tok_s": {"short": 200.0, "full_context": 100.0},
        },
    ],
}


def _run(tmp_path: Path, **kwargs):
    run_id = store_run(tmp_path / "r.db", **kwargs)
    with Store.open(tmp_path / "r.db") as store:
        return store.load_run(run_id)


def test_a_chunk_of_n_tokens_gives_n_itl_samples_of_gap_over_n() -> None:
    record = make_record(0, "c=1", 0, start_ns=0, ttft_ms=5, itl_ms=4, output_tokens=3)
    record.chunk_tokens[2] = 4  # the last chunk carries 4 tokens after a 4 ms gap
    record.output_tokens = 6
    figures = request_figures(record)
    assert figures.itls_s == pytest.approx([0.004, 0.001, 0.001, 0.001, 0.001])
    assert figures.tpot_s == pytest.approx(0.008 / 5) and figures.decode_tok_s == pytest.approx(625.0)


def test_level_figures_count_failures_and_evictions_and_skip_warmup() -> None:
    records = [
        make_record(0, "c=2", 0, start_ns=0, ttft_ms=10, itl_ms=5, output_tokens=5),
        make_record(0, "c=2", 1, start_ns=0, ttft_ms=10, itl_ms=5, output_tokens=5, evicted=True),
        make_record(0, "c=2", 2, start_ns=0, ttft_ms=10, itl_ms=5, output_tokens=5, status="error"),
        make_record(0, "c=2", 3, start_ns=0, ttft_ms=900, itl_ms=5, output_tokens=5, phase="warmup"),
    ]
    lv = level_figures(0, Level.closed(2), records)
    assert (lv.completed, lv.failed, lv.evictions, lv.concurrency) == (2, 1, 1, 2)
    assert lv.errors_by_kind == {"http_5xx": 1}
    assert lv.stats.ttft_ms.p99 == pytest.approx(10.0)  # the 900 ms warm-up is excluded
    assert lv.stats.per_stream_tok_s.median == pytest.approx(200.0)
    assert lv.stats.duration_s == pytest.approx(30 * MS / 1e9)


def test_the_plan_entry_that_fits_for_the_runs_engine_gives_the_ceilings(tmp_path: Path) -> None:
    bill = assemble([_run(tmp_path)], plan_document(PLAN))
    assert bill.plan is not None and bill.plan.quant == "q8_0"
    assert (bill.ceiling_short_tok_s, bill.planned_total_bytes) == (200.0, 4 * GIB)
    single = next(v for v in verdicts(bill) if v.scenario == "single user")
    assert single.sentence == (
        "llamacpp · tiny-test-model · short decodes one stream fastest: 100.0 tok/s (median); "
        "that is 50% of the 200.0 tok/s bandwidth ceiling of the plan."
    )
    context = next(v for v in verdicts(bill) if v.scenario == "usable context")
    assert "2048 tokens of context per request, 50% of the 4096 planned" in context.sentence


def test_the_longest_single_stream_context_is_held_against_the_ceiling_there(tmp_path: Path) -> None:
    bill = assemble([_run(tmp_path)], plan_document(PLAN))
    # context = 32 prompt + 16/2 output = 40 tokens; ceiling = 1 / (1/200 + (1/100 − 1/200) · 40/4096)
    expected_ceiling = 1 / (1 / 200 + (1 / 100 - 1 / 200) * 40 / 4096)
    (verdict,) = [v for v in verdicts(bill) if v.scenario == "against the ceiling"]
    assert verdict.sentence == (
        f"At 40 tokens of context llamacpp · tiny-test-model · short decoded 100.0 tok/s, "
        f"{100 / expected_ceiling * 100:.0f}% of the {expected_ceiling:.1f} tok/s ceiling at that context."
    )


def test_batch_ceilings_and_the_short_context_of_the_plan_are_used(tmp_path: Path) -> None:
    plan = {
        "plans": [
            {
                **PLAN["plans"][1],
                "context": 4136,
                "decode_ceiling_tok_s": {"short": 200.0, "full_context": 100.0, "short_context": 40},
                "decode_batch_tok_s": [
                    {"batch": 1, "aggregate_tok_s": 200.0},
                    {"batch": 4, "aggregate_tok_s": 500.0},
                ],
            }
        ]
    }
    bill = assemble([_run(tmp_path)], plan_document(plan))
    assert bill.batch_ceilings_tok_s == {1: 200.0, 4: 500.0}
    (ceiling,) = [v for v in verdicts(bill) if v.scenario == "against the ceiling"]
    assert (
        "50% of the 200.0 tok/s ceiling at that context" in ceiling.sentence
    )  # 40 tokens = the short context
    serving = next(v for v in verdicts(bill) if v.scenario == "serving many")
    level = next(lv for lv in bill.engines[0].levels if lv.label == "c=4")
    assert (
        f"{level.aggregate_tok_s / 500 * 100:.0f}% of the plan's 500.0 tok/s ceiling at that concurrency"
        in serving.sentence
    )


def test_a_level_the_bench_marked_invalid_is_flagged_with_why(tmp_path: Path) -> None:
    bill = assemble([_run(tmp_path, invalid={"c=4": "client event-loop lag p99 3.1 ms > 2 ms"})])
    (ladder,) = [s for s in build_page(bill, with_plots=False) if s.key == "ladder"]
    assert ladder.blocks[0] == Para(
        "Level c=4 of llamacpp · tiny-test-model · short is not trustworthy: "
        "client event-loop lag p99 3.1 ms > 2 ms.",
        "warning",
    )
    rows = {row[0]: row for row in ladder.blocks[1].rows}
    assert rows["c=4"][4] == "NO" and rows["c=1"][4] == "yes"


# Lines of a real llama-server log (this project's dense model, CPU build b1-0c1e570, -lv 4, -c 2048 -np 2).
LLAMA_SERVER_LOG = """0.00.024.562 I load_tensors:   CPU_Mapped model buffer size =     2.75 MiB
0.00.024.777 I llama_context: n_ctx                 = 2048
0.00.024.786 I llama_context:        CPU  output buffer size =     0.00 MiB
0.00.024.823 I llama_kv_cache:        CPU KV buffer size =     2.00 MiB
0.00.027.558 I sched_reserve:        CPU compute buffer size =     3.26 MiB
"""


def test_memory_used_is_the_peak_of_the_gpus_that_served_each_target(tmp_path: Path) -> None:
    run_id = store_run(tmp_path / "r.db", engines=("llamacpp", "vllm"))

    def row(
        target: int, gpu: int, t_ns: int, util: int, used: int
    ) -> dict:  # as PowerSampler + bench label it
        return {
            "t_ns": t_ns,
            "gpu": gpu,
            "power_w": 100.0,
            "sm_util_pct": util,
            "memory_used_bytes": used,
            "target_index": target,
            "level": "c=1",
            "repeat": 0,
        }

    rows = [
        row(0, 0, 1, 90, 5 * GIB),
        row(0, 0, 2, 95, 6 * GIB),
        row(0, 1, 1, 0, 30 * GIB),  # GPU 1 idle: another
        row(1, 1, 3, 80, 20 * GIB),
        row(1, 0, 3, 0, 6 * GIB),
    ]
    with Store.open(tmp_path / "r.db") as store:
        store.add_samples(run_id, "gpu_power", rows)
        run = store.load_run(run_id)
    bill = assemble([run], plan_document(PLAN))
    assert [e.memory_used_bytes for e in bill.engines] == [6 * GIB, 20 * GIB]
    assert assemble([_run(tmp_path / "plain")]).engines[0].memory_used_bytes is None  # no samples: unknown


def test_a_server_log_gives_the_memory_really_allocated(tmp_path: Path) -> None:
    bill = assemble([_run(tmp_path)], plan_document(PLAN), server_logs=[("server.log", LLAMA_SERVER_LOG)])
    assert bill.engines[0].memory_used_bytes == round(2.75 * 2**20) + 2 * 2**20 + round(3.26 * 2**20)
    memory = next(v for v in verdicts(bill) if v.scenario == "memory-starved")
    assert (
        memory.sentence
        == "llamacpp · tiny-test-model · short needs the least memory: 8.0 MiB used (plan: 4.00 GiB)."
    )
    with pytest.raises(ConfigError, match="2 server logs for 1 target"):
        assemble([_run(tmp_path)], server_logs=[("a", LLAMA_SERVER_LOG)] * 2)
    with pytest.raises(ConfigError, match="start llama-server with -lv 4"):
        assemble([_run(tmp_path)], server_logs=[("quiet.log", "main: server is listening\n")])
    with pytest.raises(
        ConfigError,
        match=r"cannot read memory from s\.log: target 0 is sglang; server logs are read for: llamacpp",
    ):
        assemble([_run(tmp_path, engines=("sglang",))], server_logs=[("s.log", LLAMA_SERVER_LOG)])


def test_failures_are_listed_with_their_first_message(tmp_path: Path) -> None:
    sections = build_page(assemble([_run(tmp_path, failure="HTTP 503: <overloaded>")]), with_plots=False)
    (ladder,) = [s for s in sections if s.key == "ladder"]
    failures = ladder.blocks[-1]
    assert failures.key == "failures"
    assert failures.rows == (
        ("llamacpp · tiny-test-model · short", "c=1", "http_5xx", "1", "HTTP 503: <overloaded>"),
    )


def test_verdicts_pick_the_engine_per_scenario(tmp_path: Path) -> None:
    bill = assemble([_run(tmp_path, engines=("llamacpp", "sglang"))])
    by = {v.scenario: v for v in verdicts(bill)}
    assert by["single user"].choice == "llamacpp · tiny-test-model · short"  # target 1 has twice the ITL
    assert "2.00× sglang · tiny-test-model · short" in by["single user"].sentence
    assert by["serving many"].choice == "llamacpp · tiny-test-model · short"
    assert "at concurrency 4" in by["serving many"].sentence
    assert by["memory-starved"].choice is None and "--plan" in by["memory-starved"].sentence


def test_absent_inputs_leave_notes_and_every_section_is_there(tmp_path: Path) -> None:
    sections = build_page(assemble([_run(tmp_path)]))
    keys = [s.key for s in sections]
    assert keys == [
        "summary",
        "runs",
        "ladder",
        "throughput",
        "latency",
        "roofline",
        "memory",
        "timeline",
        "doctor",
        "power",
        "spec",
        "verdict",
    ]
    notes = [b.text for s in sections for b in s.blocks if isinstance(b, Para) and b.kind == "note"]
    assert any("--plan" in n for n in notes) and any("--doctor" in n for n in notes)
    assert any("--spec" in n for n in notes)
    assert any(n.startswith("Memory: planned breakdown") for n in notes)


def test_a_partial_run_says_so(tmp_path: Path) -> None:
    bill = assemble([_run(tmp_path, finish=False)])
    warnings = [
        b.text
        for s in build_page(bill, with_plots=False)
        for b in s.blocks
        if isinstance(b, Para) and b.kind == "warning"
    ]
    assert any("partial" in w for w in warnings)
    text, _ = render_report(bill, "md")
    assert "partial run" in text


def test_html_is_well_formed_and_escapes_what_servers_return(tmp_path: Path) -> None:
    run = _run(tmp_path, model="<script>alert(1)</script>")
    html, extra = render_report(
        assemble(
            [run],
            plan_document(PLAN),
            doctor={
                "findings": [{"severity": "critical", "title": "<img src=x onerror=alert(2)>", "fix": "x"}]
            },
        ),
        "html",
    )
    assert extra == {}
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert not re.search(r"(src|href)=\"(https?:)?//|@import|url\(\s*['\"]?https?:", html)  # nothing to fetch


def test_markdown_escapes_markup() -> None:
    assert md_text("<b>x</b> | *y*") == r"&lt;b&gt;x&lt;/b&gt; \| \*y\*"
    assert md_text("a\nb") == "a b"


def test_commands_in_backticks_are_code_and_a_backticked_server_string_stays_text() -> None:
    from servelab.report.html import render_html
    from servelab.report.markdown import render_markdown
    from servelab.report.page import Items, Section, code_spans

    assert code_spans("run `a b` then `c`.") == (
        (False, "run "),
        (True, "a b"),
        (False, " then "),
        (True, "c"),
        (False, "."),
    )
    assert code_spans("one ` alone") == ((False, "one ` alone"),)
    hostile = "model `<img src=x onerror=alert(1)>` said | *hi*"
    sections = (
        Section(
            "s", "S", (Para("No plan: run `servelab plan --save FILE` and pass --plan."), Items((hostile,)))
        ),
    )
    md = render_markdown(sections, title="t", generated="now")
    assert "No plan: run `servelab plan --save FILE` and pass --plan." in md
    assert r"- model `<img src=x onerror=alert(1)>` said \| \*hi\*" in md  # a code span: shown literally
    page = render_html(sections, title="t", generated="now")
    assert "<code>servelab plan --save FILE</code>" in page
    assert "<code>&lt;img src=x onerror=alert(1)&gt;</code> said | *hi*" in page and "<img" not in page


def test_markdown_links_plots_written_as_standalone_svg(tmp_path: Path) -> None:
    text, files = render_report(assemble([_run(tmp_path)], plan_document(PLAN)), "md", plot_dir="bill_plots")
    assert "![Aggregate output throughput vs concurrency](bill_plots/aggregate-throughput.svg)" in text
    assert set(files) >= {
        "bill_plots/aggregate-throughput.svg",
        "bill_plots/memory.svg",
        "bill_plots/roofline.svg",
    }
    root = ET.fromstring(files["bill_plots/memory.svg"])
    assert root.tag == "{http://www.w3.org/2000/svg}svg"


def test_the_terminal_bill_at_80_columns_cuts_no_figure_short(tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from servelab.report.terminal import render_terminal

    bill = assemble([_run(tmp_path)])
    sections = build_page(bill, with_plots=False)
    out = io.StringIO()
    render_terminal(Console(file=out, width=80, color_system=None), bill, sections)
    text = out.getvalue()
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    (ladder,) = [s for s in sections if s.key == "ladder"]
    table = ladder.blocks[0]
    squeezed = "".join(text.split())  # a cell may wrap onto the next line, but all of it is there
    for row in table.rows:
        assert all(cell in text or cell.replace(" ", "") in squeezed for cell in row), row
