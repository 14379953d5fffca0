"""Plan files through the CLI: `spec`, `verify` and `report` read --plan with the one reader (plan.io.load_plan),
so each bad file gives the same one line on stderr, nothing on stdout and exit 2; and spec's measured c=1
speed is the figure bench itself reports for the same records."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from servelab.bench.config import BenchConfig
from servelab.bench.runner import run
from servelab.bench.schedule import StopRule
from servelab.bench.workloads import WorkloadSpec
from servelab.cli.app import main
from servelab.errors import ConfigError
from servelab.speculative import measured
from servelab.store import Store
from servelab.verify.asked import EXPECT_KEYS
from tests.bench_sim import sim_process
from tests.integration.test_verify_fixtures import serve_fixture  # noqa: F401  (the loopback fixture server)
from tests.runs_factory import store_run

HINT = "save one with `servelab plan … --save FILE` (or --json > FILE)"
BAD_FILES = {  # name -> (how to make it, the end of the one-line message after "--plan PATH: ")
    "missing": (None, "no such file"),
    "directory": ("dir", f"is a directory, not a file; {HINT}"),
    "binary": (bytes(range(256)) * 4, f"not a JSON text file (not UTF-8); {HINT}"),
    "not-json": (
        b"{plans: 1",
        f"not JSON (Expecting property name enclosed in double quotes at line 1); {HINT}",
    ),
    "list": (b"[1, 2]", f"not a JSON object (it holds a list); {HINT}"),
    "no-entries": (
        b'{"model": "m", "plans": []}',
        f"no plan entries (a non-empty 'plans' list of objects); {HINT}",
    ),
    "entry-not-object": (b'{"plans": ["sglang"]}', "plans[0] is a string, not a plan entry (an object)"),
}


def _bad_file(tmp_path: Path, name: str) -> tuple[Path, str]:
    content, message = BAD_FILES[name]
    path = tmp_path / f"{name}.json"
    if content == "dir":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content)
    return path, f"servelab: error: --plan {path}: {message}\n"


def _one_line_error(capsys, args: list[str], expected_err: str) -> None:
    code = main(args)
    out, err = capsys.readouterr()
    assert (code, out, err) == (2, "", expected_err)


@pytest.mark.parametrize("name", BAD_FILES)
def test_spec_plan_errors(tmp_path: Path, capsys, name: str) -> None:
    path, expected = _bad_file(tmp_path, name)
    _one_line_error(
        capsys, ["spec", "--accept-rate", "0.46", "--draft-tokens", "4", "--plan", str(path)], expected
    )


@pytest.mark.parametrize("name", BAD_FILES)
def test_report_plan_errors(tmp_path: Path, capsys, name: str) -> None:
    db = tmp_path / "runs.db"
    store_run(db)
    path, expected = _bad_file(tmp_path, name)
    _one_line_error(
        capsys, ["report", "--db", str(db), "--plan", str(path), "-o", str(tmp_path / "b.html")], expected
    )
    assert not (tmp_path / "b.html").exists()


@pytest.mark.parametrize("name", BAD_FILES)
def test_verify_plan_errors(tmp_path: Path, capsys, serve_fixture, name: str) -> None:  # noqa: F811
    server = serve_fixture("sglang/awq-262k")
    path, expected = _bad_file(tmp_path, name)
    _one_line_error(capsys, ["verify", server.url, "--plan", str(path)], expected)


def test_verify_refuses_a_bad_plan_before_it_contacts_the_server(tmp_path: Path, capsys) -> None:
    with socket.socket() as unused:  # a port nothing listens on: a request would be a connection error
        unused.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{unused.getsockname()[1]}"
    path, expected = _bad_file(tmp_path, "not-json")
    _one_line_error(capsys, ["verify", url, "--plan", str(path)], expected)
    _one_line_error(
        capsys,
        ["verify", url, "--expect", "colour=blue"],
        "servelab: error: --expect: unknown key 'colour'; valid keys: " + ", ".join(EXPECT_KEYS) + "\n",
    )


def test_spec_names_the_draft_plan_flag_and_the_fields_it_needs(tmp_path: Path, capsys) -> None:
    target = tmp_path / "target.json"
    target.write_text(
        '{"plans": [{"engine": "vllm", "quant": "bf16", "context": 8192, "kv_dtype": "auto", '
        '"fits": true, "memory_bytes": {}, "decode_ceiling_tok_s": {"short": 100.0}}]}'
    )
    draft = tmp_path / "draft.json"
    draft.write_text('{"plans": [{"engine": "vllm", "quant": "bf16"}]}')
    args = [
        "spec",
        "--accept-rate",
        "0.46",
        "--draft-tokens",
        "4",
        "--plan",
        str(target),
        "--draft-plan",
        str(draft),
    ]
    _one_line_error(
        capsys,
        args,
        f"servelab: error: --draft-plan {draft}: plans[0] lacks context, kv_dtype, fits, "
        f"memory_bytes; {HINT}\n",
    )


def test_verify_accepts_a_minimal_hand_written_plan(tmp_path: Path, capsys, serve_fixture) -> None:  # noqa: F811
    server = serve_fixture("sglang/awq-262k")  # serves context 262144, KV fp8_e5m2
    plan = tmp_path / "plan.json"
    plan.write_text('{"plans": [{"context": 262144, "kv_dtype": "fp8_e5m2"}]}')
    assert main(["verify", server.url, "--plan", str(plan), "--strict"]) == 0
    assert capsys.readouterr().err == ""


def test_report_accepts_a_plan_document_or_one_entry(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    store_run(db)
    entry = '{"engine": "llamacpp", "decode_ceiling_tok_s": {"short": 150.0, "full_context": 120.0}}'
    for name, text in (("doc.json", f'{{"model": "tiny", "plans": [{entry}]}}'), ("entry.json", entry)):
        (tmp_path / name).write_text(text)
        assert (
            main(["report", "--db", str(db), "--plan", str(tmp_path / name), "-o", str(tmp_path / "b.md")])
            == 0
        )
        assert capsys.readouterr().out == "" and "150.0 tok/s" in (tmp_path / "b.md").read_text()
    (tmp_path / "other.json").write_text('{"findings": []}')  # e.g. a doctor file given as --plan
    _one_line_error(
        capsys,
        ["report", "--db", str(db), "--plan", str(tmp_path / "other.json")],
        f"servelab: error: --plan {tmp_path / 'other.json'}: no plan entries (a non-empty 'plans' "
        f"list of objects); {HINT}\n",
    )


def test_spec_reads_the_per_stream_speed_bench_reports_for_the_same_records(tmp_path: Path, capsys) -> None:
    with sim_process("--ttft-ms", "5", "--itl-ms", "4") as url, Store.open(tmp_path / "r.db") as store:
        config = BenchConfig(
            targets=(url,),
            concurrency=(1,),
            repeat=2,
            warmup=1,
            stop=StopRule(requests=4),
            workload=WorkloadSpec("short", 8, 6),
        )
        stored = run(config, store)
    result, run_id = stored.to_json(), stored.run_id
    (level,) = result["targets"][0]["levels"]
    bench_tok_s = level["per_stream_tok_s"]["p50"]
    assert (
        bench_tok_s is not None and measured.run_single_stream_tok_s(tmp_path / "r.db", run_id) == bench_tok_s
    )
    args = [
        "spec",
        "--accept-rate",
        "0.46",
        "--draft-tokens",
        "4",
        "--db",
        str(tmp_path / "r.db"),
        "--baseline-run",
        run_id,
        "--spec-run",
        run_id,
        "--json",
    ]
    assert main(args) == 0 and '"measured_speedup": 1.0' in capsys.readouterr().out


def test_spec_refuses_a_run_of_several_targets_at_c1(tmp_path: Path) -> None:
    with (
        sim_process("--ttft-ms", "5", "--itl-ms", "4") as one,
        sim_process("--ttft-ms", "5", "--itl-ms", "8") as two,
    ):
        config = BenchConfig(
            targets=(one, two),
            concurrency=(1,),
            warmup=0,
            stop=StopRule(requests=2),
            workload=WorkloadSpec("short", 8, 6),
        )
        with Store.open(tmp_path / "r.db") as store:
            run_id = run(config, store).run_id
    with pytest.raises(
        ConfigError, match=f"run {run_id} benched 2 targets at c=1; give runs of one target each"
    ):
        measured.run_single_stream_tok_s(tmp_path / "r.db", run_id)
