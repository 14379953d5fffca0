"""`advise --confirm`'s pure parts: the ladder around the advised load, the plan's engine flags without what the
launcher writes, the bench line, the verdict per figure (exact values)."""

from __future__ import annotations

import pytest

from servelab.advise.confirm import WITHIN, Confirmation, MeasuredLevel, engine_args, ladder_around
from servelab.report.advice import ConfirmedFigure


@pytest.mark.parametrize(
    ("load", "failing", "closed", "levels"),
    [
        (4, None, True, (2, 4, 8)),
        (4, 6, True, (2, 4, 6)),
        (1, 2, True, (1, 2)),
        (5, 5, True, (2, 5, 6)),
        (2.0, None, False, (1.0, 2.0, 4.0)),
        (2.0, 2.2, False, (1.0, 2.0, 2.5)),
    ],
)
def test_the_ladder_brackets_the_advised_load(load, failing, closed, levels) -> None:
    assert ladder_around(load, failing, closed) == levels


def test_engine_args_drop_the_program_model_host_and_port() -> None:
    llama = (
        "llama-server",
        "-m",
        "models/x.gguf",
        "--host",
        "127.0.0.1",
        "--port",
        "8080",
        "-c",
        "4096",
        "-np",
        "4",
    )
    assert engine_args(llama) == ["-c", "4096", "-np", "4"]
    vllm = ("vllm", "serve", "m", "--host", "127.0.0.1", "--port", "8000", "--max-model-len", "1024")
    assert engine_args(vllm) == ["--max-model-len", "1024"]


def _confirmed(measured: float, misses: tuple[str, ...] = ()) -> Confirmation:
    level = MeasuredLevel(load=4, goodput_tok_s=measured, ttft_p99_ms=100.0, tpot_p99_ms=10.0, misses=misses)
    return Confirmation(
        candidate="llamacpp F16 kv=f16 tp=1 slots=4",
        engine="llamacpp",
        load=4,
        ran=True,
        levels=(level,),
        figures=(ConfirmedFigure("goodput_tok_s", 100.0, 95.0, measured),),
    )


def test_the_verdict_says_within_or_not_and_flags_a_missed_slo() -> None:
    assert WITHIN == 0.15
    ok = _confirmed(90.0)
    assert ok.goodput_error() == pytest.approx(10 / 90) and ok.meets_slo is True
    assert ok.verdict() == (
        "measured at 4 users: meets the SLO; goodput within 15% of the advice (+11.1%), +5.6% "
        "re-predicted with the calibration"
    )
    far = _confirmed(50.0, ("ttft_p99_ms 2400 > 2000",))
    assert far.meets_slo is False
    assert far.verdict().startswith(
        "measured at 4 users: MISSES the SLO (ttft_p99_ms 2400 > 2000); goodput NOT "
        "within 15% of the advice (+100.0%)"
    )
    not_here = Confirmation(candidate="x", engine="vllm", load=4, ran=False, reason="no GPU here")
    assert not_here.verdict() == "not measured here: no GPU here" and not_here.meets_slo is None
    assert ConfirmedFigure.error(1.0, 0.0) is None and ConfirmedFigure.error(None, 1.0) is None


def test_the_lines_for_a_person_hold_advice_beside_measurement() -> None:
    from servelab.cli.advise import confirmation_lines

    lines = confirmation_lines(_confirmed(50.0, ("ttft_p99_ms 2400 > 2000",)))
    assert lines[0].startswith(
        "confirm llamacpp F16 kv=f16 tp=1 slots=4: measured at 4 users: MISSES the SLO"
    )
    row = next(line for line in lines if line.lstrip().startswith("goodput_tok_s"))
    assert row.split() == ["goodput_tok_s", "100.0", "95.0", "50.0", "+100.0%"]
    assert (
        "  measured 4: 50.0 tok/s, p99 TTFT 100.0 ms, TPOT 10.0 ms; misses: ttft_p99_ms 2400 > 2000" in lines
    )
    assert confirmation_lines(None) == []
