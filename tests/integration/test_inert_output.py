"""Outside strings (model names, run names, what a server says) reach terminals and pages inert (issue 14.5)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from servelab.cli.app import main
from tests.bench_sim import sim_process
from tests.runs_factory import store_run
from tests.unit.model_files import write_gguf

# ESC (a colour and a screen clear), an OSC 8 hyperlink ended by BEL, a bare BEL and rich markup; NUL is
# added where the string does not travel through argv (which cannot hold it)
HOSTILE = "m\x1b[31m\x1b[2J\x1b]8;;https://evil.example\x07link\x1b]8;;\x07\x07[red]x[/red]"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _assert_inert(text: str) -> None:
    assert RAW.search(text) is None, RAW.findall(text)
    assert "Traceback" not in text


def _assert_inert_terminal(captured) -> None:
    for stream in (captured.out, captured.err):
        _assert_inert(stream)
    shown = captured.out + captured.err
    # the payload shown escaped (tables wrap long cells and series labels are clipped, so in pieces)
    for piece in ("m\\x1b[31m\\x1b[2J\\x1b]8;;https://", "\\x07", "\\x1b]8;;"):
        assert piece in shown
    assert "[red]x[/red]" in shown  # markup shown literally


def test_runs_and_report_terminal_show_a_hostile_run_inert(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    store_run(db, name=HOSTILE + "\x00", model=HOSTILE + "\x00", failure="server said \x1b[5mboom\x00")
    assert main(["runs", "--db", str(db)]) == 0
    _assert_inert_terminal(capsys.readouterr())
    assert main(["report", "--db", str(db), "--terminal"]) == 0
    captured = capsys.readouterr()
    _assert_inert_terminal(captured)
    assert "\\x00" in captured.out


def test_html_and_markdown_render_a_hostile_run_with_every_plot(tmp_path: Path, capsys) -> None:
    store_run(tmp_path / "plain.db", failure="server said boom")
    assert main(["report", "--db", str(tmp_path / "plain.db"), "-o", str(tmp_path / "plain.html")]) == 0
    plots = (tmp_path / "plain.html").read_text().count("<svg")
    db = tmp_path / "runs.db"
    store_run(db, name=HOSTILE + "\x00", model=HOSTILE + "\x00\ufffe", failure="server said \x1b[5mboom\x00")
    assert main(["report", "--db", str(db), "-o", str(tmp_path / "bill.html")]) == 0
    assert main(["report", "--db", str(db), "-o", str(tmp_path / "bill.md")]) == 0
    _assert_inert(capsys.readouterr().err)
    html = (tmp_path / "bill.html").read_text()
    _assert_inert(html)
    assert "\ufffe" not in html and html.count("<svg") == plots >= 5 and "m\\x1b[31m" in html
    markdown = (tmp_path / "bill.md").read_text()
    _assert_inert(markdown)
    svgs = sorted((tmp_path / "bill_plots").glob("*.svg"))
    assert svgs
    for svg in svgs:
        _assert_inert(svg.read_text())
        ET.parse(svg)  # valid XML


def test_bench_and_verify_print_what_a_hostile_server_says_inert(tmp_path: Path, capsys) -> None:
    with sim_process("--ttft-ms", "5", "--itl-ms", "5", "--model", HOSTILE) as url:
        code = main(
            [
                "bench",
                url,
                "--concurrency",
                "1",
                "--requests",
                "2",
                "--output-tokens",
                "4",
                "--input-tokens",
                "8",
                "--db",
                str(tmp_path / "r.db"),
            ]
        )
        bench = capsys.readouterr()
        verify_code = main(["verify", url])
        verify = capsys.readouterr()
    assert code == 0
    _assert_inert_terminal(bench)
    assert verify_code == 0, verify.err
    _assert_inert_terminal(verify)


def test_plan_prints_a_hostile_gguf_name_and_path_inert(tmp_path: Path, capsys) -> None:
    path = tmp_path / "evil\x1b[2J.gguf"
    kvs = {
        "general.architecture": "llama",
        "general.name": HOSTILE + "\x00",
        "llama.block_count": 2,
        "llama.embedding_length": 128,
        "llama.context_length": 4096,
        "llama.attention.head_count": 4,
        "llama.attention.head_count_kv": 2,
        "llama.feed_forward_length": 256,
    }
    write_gguf(path, kvs, [("token_embd.weight", (128, 1000), 0, 128 * 1000 * 4)])
    code = main(["plan", str(path), "--gpu", "rtx4090", "--engine", "llamacpp", "--context", "4096"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    for stream in (captured.out, captured.err):
        _assert_inert(stream)
    assert "evil\\x1b[2J.gguf" in captured.out


INVISIBLE = "Qwen\u200b3\u202e\u061c\ufeff\u2028x"
INVISIBLE_RAW = re.compile("[\u061c\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060\u2066-\u2069\ufeff]")


def test_invisible_and_bidi_characters_in_a_model_id_are_shown_escaped_everywhere(
    tmp_path: Path, capsys
) -> None:
    db = tmp_path / "runs.db"
    store_run(db, name=INVISIBLE, model=INVISIBLE)
    assert main(["report", "--db", str(db), "--terminal"]) == 0
    terminal = capsys.readouterr().out
    assert main(["report", "--db", str(db), "-o", str(tmp_path / "bill.html")]) == 0
    assert main(["report", "--db", str(db), "-o", str(tmp_path / "bill.md")]) == 0
    for shown in (terminal, (tmp_path / "bill.html").read_text(), (tmp_path / "bill.md").read_text()):
        assert INVISIBLE_RAW.search(shown) is None
        assert "\\u200b3" in shown or "\\\\u200b3" in shown
