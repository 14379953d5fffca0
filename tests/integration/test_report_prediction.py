"""The report holds a measured ladder (bench against `servelab sim`) to a prediction (`servelab predict`): the
ladder plots draw the prediction dashed, and a table gives each level's TTFT p50, TPOT p50 and output tok/s,
predicted and measured as the two runs stored them, with the error and the median |error| per figure."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from servelab.cli.app import main
from servelab.store import Store
from tests.bench_sim import sim_process

LOAD = ["--concurrency", "1,2", "--requests", "4", "--input-tokens", "64", "--output-tokens", "16"]
PLAN = ["Qwen/Qwen3-8B", "--gpu", "rtx4090", "--engine", "vllm", "--quant", "bf16", "--context", "8192"]


def _run_id(args: list[str], capsys) -> str:
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["run_id"]


def _table(markdown: str, title_start: str) -> list[list[str]]:
    """The rows of the Markdown table under the line starting with `title_start`."""
    lines = markdown.splitlines()
    at = next(i for i, line in enumerate(lines) if title_start in line)
    rows = []
    for line in lines[at + 1 :]:
        if not line.strip() and rows:
            break
        if line.startswith("|") and not re.match(r"^\|[\s:|-]+\|$", line):
            cells = re.split(r"(?<!\\)\|", line.strip().removeprefix("|").removesuffix("|"))
            rows.append([cell.strip().replace("\\|", "|") for cell in cells])
    return rows[1:]  # without the header


def _per_stream_svg(html: str) -> str:
    return html[html.index('data-plot="per-stream"') :].split("</svg>")[0]


def test_report_overlays_the_prediction_and_tables_its_error(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    predicted = _run_id(["predict", *PLAN, *LOAD, "--db", str(db)], capsys)
    with sim_process("--ttft-ms", "40", "--itl-ms", "20") as url:
        measured = _run_id(["bench", url, *LOAD, "--db", str(db)], capsys)
    bill = tmp_path / "bill.md"
    assert main(["report", measured, "--predicted", predicted, "--db", str(db), "-o", str(bill)]) == 0
    rows = _table(bill.read_text(), "Predicted vs measured: openai")
    with Store.open(db, must_exist=True) as store:
        stats = {
            run: {lv.level.label: lv for (_, lv), lv in store.load_run(run).level_stats.items()}
            for run in (predicted, measured)
        }
    figures = (lambda s: s.ttft_ms.p50, lambda s: s.tpot_ms.p50, lambda s: s.output_tok_s)
    assert [r[0] for r in rows] == ["c=1", "c=2", "median |error|"]
    errors: list[list[float]] = [[], [], []]
    for row in rows[:2]:
        p, m = stats[predicted][row[0]], stats[measured][row[0]]
        for k, figure in enumerate(figures):
            want_p, want_m = figure(p), figure(m)
            error = (want_p - want_m) / want_m
            errors[k].append(abs(error))
            assert row[1 + 3 * k : 4 + 3 * k] == [f"{want_p:,.1f}", f"{want_m:,.1f}", f"{error:+.1%}"]
    assert rows[2][3::3] == [f"{statistics.median(e):.1%}" for e in errors]
    # the sim answers in 40 ms + 20 ms a token, the emulated 4090 in about 47 + 25: TPOT predicted high
    assert rows[0][6].startswith("+") and rows[1][6].startswith("+")

    html_with = tmp_path / "with.html"
    assert main(["report", measured, "--predicted", predicted, "--db", str(db), "-o", str(html_with)]) == 0
    without = tmp_path / "without.html"
    assert main(["report", measured, "--db", str(db), "-o", str(without)]) == 0
    overlaid = _per_stream_svg(html_with.read_text())
    assert "stroke-dasharray" in overlaid and "vllm · Qwen/Qwen3-8B · short · predicted" in overlaid
    assert "stroke-dasharray" not in _per_stream_svg(without.read_text())
    assert "Predicted vs measured" not in without.read_text()


def test_predicted_must_name_a_prediction(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    with sim_process("--ttft-ms", "5", "--itl-ms", "5") as url:
        measured = _run_id(["bench", url, "--concurrency", "1", "--requests", "2", "--db", str(db)], capsys)
    assert (
        main(["report", measured, "--predicted", measured, "--db", str(db), "-o", str(tmp_path / "b.md")])
        == 2
    )
    out, err = capsys.readouterr()
    assert out == "" and "was measured, not predicted" in err and "Traceback" not in err
