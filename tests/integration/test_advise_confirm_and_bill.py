"""`servelab advise`'s front as compose services, `--confirm` where the hardware is not this machine (the commands
that would confirm it, nothing launched), and the bill rendering an advice (`report --advice`): a table, the
front as a plot, advice vs measurement, hostile text escaped, a wrong file one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from servelab.cli.app import main

QWEN3_8B = [
    "advise",
    "Qwen/Qwen3-8B",
    "--gpu",
    "h100-sxm",
    "--users",
    "4",
    "--slo",
    "ttft_p99_ms=1000,tpot_p99_ms=50",
]


@pytest.fixture(scope="module")
def advised(tmp_path_factory: pytest.TempPathFactory) -> dict:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*QWEN3_8B, "--engine", "vllm", "--confirm", "--json"]) == 0
    return json.loads(out.getvalue())


def test_each_front_member_carries_its_compose_service(advised: dict) -> None:
    for member in advised["front"]:
        service = yaml.safe_load(member["compose"])["services"]["vllm"]
        words = member["command"].split()
        assert service["entrypoint"][:2] == ["vllm", "serve"] and service["entrypoint"][-4:] == words[-4:]
        assert service["ports"] == ["127.0.0.1:8000:8000"]
        # the shipped step model priced it: the goodput carries its cross-validation band (the figure times its
        # regime's measured/predicted factors, so a regime the model underpredicts has a band above the figure)
        low, high = member["bands"]["output_tok_s_per_gpu"]
        assert 0 < low < high


def test_confirm_off_this_machine_prints_the_commands_that_would_confirm_it(advised: dict) -> None:
    c = advised["confirmation"]
    assert c["ran"] is False and "1 x h100-sxm" in c["reason"] and "--gpu cpu" in c["reason"]
    assert c["candidate"] == advised["front"][0]["candidate"]
    launch, bench = c["commands"]
    assert launch == advised["front"][0]["command"]
    load = advised["front"][0]["load_per_replica"]
    assert bench.startswith("servelab bench URL --concurrency ") and f",{int(load)}," in bench
    assert "--requests 64" in bench and "--workload short" in bench
    assert c["verdict"].startswith("not measured here") and c["figures"] == [] and c["meets_slo"] is None


def test_confirm_lines_for_a_person(capsys) -> None:
    assert main([*QWEN3_8B, "--engine", "vllm", "--confirm"]) == 0
    out = capsys.readouterr().out
    assert "confirm vllm " in out and "not measured here" in out
    assert "to confirm it where it runs:" in out and "$ servelab bench URL --concurrency" in out


def test_the_bill_renders_an_advice_with_its_front_plot_and_escapes_its_text(
    advised: dict, tmp_path: Path, capsys
) -> None:
    hostile = "<script>alert(1)</script>\u202e"
    doc = dict(advised)
    doc["front"] = [{**advised["front"][0], "candidate": hostile}, *advised["front"][1:]]
    doc["confirmation"] = {
        **advised["confirmation"],
        "ran": True,
        "meets_slo": False,
        "verdict": "MISSES",
        "figures": [
            {"figure": "goodput_tok_s", "advised": 100.0, "repredicted": 90.0, "measured": 80.0},
            {"figure": "tpot_p99_ms", "advised": 10.0, "repredicted": 11.0, "measured": 12.0},
        ],
    }
    path = tmp_path / "advice.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert (
        main(
            [
                "report",
                "--advice",
                str(path),
                "-o",
                str(tmp_path / "bill.html"),
                "--db",
                str(tmp_path / "none.db"),
            ]
        )
        == 0
    )
    html = (tmp_path / "bill.html").read_text(encoding="utf-8")
    assert "<script>alert" not in html and "&lt;script&gt;" in html and "\u202e" not in html
    assert 'id="advice"' in html and 'aria-label="Advice: goodput per GPU vs p99 TPOT' in html
    assert (
        "Advice vs measurement" in html and "+25.0%" in html and "+12.5%" in html
    )  # (100-80)/80, (90-80)/80
    md = tmp_path / "bill.md"
    assert main(["report", "--advice", str(path), "-o", str(md), "--db", str(tmp_path / "none.db")]) == 0
    assert "The Pareto front" in md.read_text(encoding="utf-8")


def test_the_bill_shows_the_slo_at_the_bands_edge_and_the_statistical_tie(
    advised: dict, tmp_path: Path
) -> None:
    """The front table carries what advise judged at the bands' upper edge (met, or the SLOs broken and the safe
    load) and the statistical tie, by the tied member's rank."""
    first = {
        **advised["front"][0],
        "bands": {"output_tok_s_per_gpu": [10.0, 30.0], "ttft_p99_ms": [100.0, 7000.0]},
        "safe_at_load": False,
        "misses_at_band_edge": ["ttft_p99_ms 7000 > 1000"],
        "safe_capacity_per_replica": 2,
    }
    second = {
        **first,
        "candidate": "second",
        "safe_at_load": True,
        "misses_at_band_edge": [],
        "safe_capacity_per_replica": 4,
        "within_band_of": first["candidate"],
    }
    path = tmp_path / "advice.json"
    path.write_text(json.dumps({**advised, "front": [first, second]}), encoding="utf-8")
    md = tmp_path / "bill.md"
    assert main(["report", "--advice", str(path), "-o", str(md), "--db", str(tmp_path / "none.db")]) == 0
    text = md.read_text(encoding="utf-8")
    assert "missed: ttft\\_p99\\_ms 7000 &gt; 1000; safe to 2 per replica" in text  # escaped as Markdown
    assert "met; safe to 4 per replica" in text and "within the band of 1" in text


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ({"model": "x"}, "not the output of `servelab advise --json`"),
        (
            {"front": [{"candidate": "a", "output_tok_s_per_gpu": "fast"}], "ranked": []},
            "--advice.front[0]: output_tok_s_per_gpu is str, not a number",
        ),
        ({"front": "x", "ranked": []}, "--advice: front is str, not a list"),
    ],
)
def test_a_wrong_advice_file_is_one_line(doc: dict, says: str, tmp_path: Path, capsys) -> None:
    path = tmp_path / "a.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert main(["report", "--advice", str(path), "-o", str(tmp_path / "b.html")]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1


def test_with_a_fitted_step_model_the_goodput_carries_its_band(tmp_path: Path, monkeypatch, capsys) -> None:
    """The corpus fit's cross-validation band of "output tok/s" scales the front's goodput; the p99 latencies
    take their median figures' bands, and this model has none for them; the bill writes the band beside the
    figure."""
    from servelab.predict.stepmodel import STEP_MODEL_ENV, StepModel

    model = StepModel({}, {"note": "test-made"}, {"*|*|output tok/s|*": (0.7, 1.2)})
    path = tmp_path / "stepmodel.json"
    path.write_text(json.dumps(model.to_json()), encoding="utf-8")
    monkeypatch.setenv(STEP_MODEL_ENV, str(path))
    assert main([*QWEN3_8B, "--engine", "vllm", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    best = doc["front"][0]
    assert best["effective_figures"] == "corpus"
    goodput = best["output_tok_s_per_gpu"]
    low, high = best["bands"]["output_tok_s_per_gpu"]
    assert low == pytest.approx(goodput * 0.7, abs=0.02) and high == pytest.approx(goodput * 1.2, abs=0.02)
    assert set(best["bands"]) == {"output_tok_s_per_gpu"}
    advice = tmp_path / "advice.json"
    advice.write_text(json.dumps(doc), encoding="utf-8")
    assert main(["report", "--advice", str(advice), "--terminal"]) == 0
    assert f"{goodput:,.1f} ({low:,.1f}–{high:,.1f})" in capsys.readouterr().out


def test_confirm_without_a_model_is_one_line(capsys) -> None:
    assert main(["advise", "--gpu", "cpu", "--slo", "ttft_p99_ms=1000", "--confirm"]) == 2
    out, err = capsys.readouterr()
    assert (
        out == ""
        and err.strip() == "servelab: error: --confirm needs a MODEL: it measures the advice for one model"
    )
