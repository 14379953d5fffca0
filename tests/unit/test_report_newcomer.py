"""What a newcomer tripped over in the bill (issue 24 item 6): one box per kind of untrustworthy level, listing the
levels; the host's verdict apart from the server's; one "not like for like" box per kind, listing the runs."""

from __future__ import annotations

from pathlib import Path

from servelab.bench.monitor import validity
from servelab.report import assemble
from servelab.report.page import Items, Para, build_page
from servelab.report.verdict import engine_verdict
from servelab.results.run import RunWorkload
from servelab.store import Store
from tests.runs_factory import store_run

CALM = {"wake_late_p99_ms": 0.4, "lag_p99_ms": 0.05, "cpu_fraction": 0.3}


def _host_took(late_ms: float) -> str:
    why = validity({**CALM, "wake_late_p99_ms": late_ms}, 2.0, 0.9, server_here=True, pinned=True)[1]
    assert why is not None
    return why


def _load(db: Path, run_ids: list[str]):
    with Store.open(db) as store:
        return [store.load_run(r) for r in run_ids]


def test_levels_struck_for_one_reason_share_one_box_with_the_figures_as_a_range(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    run = store_run(db, invalid={"c=1": _host_took(5.25), "c=2": _host_took(3.6), "c=4": _host_took(4.0)})
    (ladder,) = [s for s in build_page(assemble(_load(db, [run])), with_plots=False) if s.key == "ladder"]
    boxes = [b for b in ladder.blocks if isinstance(b, Para) and b.kind == "warning"]
    assert len(boxes) == 1, boxes
    assert boxes[0].text.startswith(
        "These levels are not trustworthy: client wake-ups p99 3.6–5.25 ms late: "
        "the host took the CPU away from the client"
    )
    assert "taskset" not in boxes[0].text and "rerun" in boxes[0].text
    listed = next(b for b in ladder.blocks if isinstance(b, Items))
    assert [i.split(" of ")[0] for i in listed.items] == ["c=1", "c=2", "c=4"]


def test_two_reasons_make_two_boxes(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    run = store_run(db, invalid={"c=1": _host_took(5.0), "c=4": "client event-loop lag p99 3.1 ms > 2 ms"})
    (ladder,) = [s for s in build_page(assemble(_load(db, [run])), with_plots=False) if s.key == "ladder"]
    boxes = [b.text for b in ladder.blocks if isinstance(b, Para) and b.kind == "warning"]
    assert len(boxes) == 2 and boxes[1].startswith("Level c=4 of ") and "lag p99 3.1 ms" in boxes[1]


def test_the_host_is_judged_apart_from_the_server(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    run = store_run(db, invalid={"c=1": _host_took(5.0), "c=2": _host_took(4.0)})
    bill = assemble(_load(db, [run]))
    sentence = engine_verdict(bill, bill.engines[0])
    server, _, host = sentence.partition(" The host took the CPU away")
    assert "client-bound" not in server.lower() and server.endswith("."), sentence  # the server's verdict
    assert host.startswith(" from the load generator at c=1, c=2") and "rerun" in host, sentence
    lagged = store_run(tmp_path / "l.db", invalid={"c=2": "client event-loop lag p99 3.1 ms > 2 ms"})
    bill = assemble(_load(tmp_path / "l.db", [lagged]))
    assert engine_verdict(bill, bill.engines[0]).startswith("Client-bound at c=2")


def test_runs_not_like_for_like_are_one_box_per_kind(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    first = store_run(db)
    others = [
        store_run(db, ladder=(1, 2), workload=RunWorkload(kind="mixed", input_tokens=8, output_tokens=4))
        for _ in range(4)
    ]
    bill = assemble(_load(db, [first, *others]))
    workloads = [w for w in bill.warnings if "different workloads" in w]
    settings = [w for w in bill.warnings if "different settings" in w]
    assert len(workloads) == 1 and len(settings) == 1, bill.warnings
    assert all(r in workloads[0] for r in others) and f"from run {first}" in workloads[0]
    assert not any("settingss" in w for w in bill.warnings)


def test_levels_too_short_for_a_p99_get_one_note(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    run = store_run(db)
    (ladder,) = [s for s in build_page(assemble(_load(db, [run])), with_plots=False) if s.key == "ladder"]
    notes = [b.text for b in ladder.blocks if isinstance(b, Para) and b.kind == "note"]
    completed = sorted({lv.completed for lv in assemble(_load(db, [run])).engines[0].levels})
    assert notes == [
        f"Some levels completed only {', '.join(map(str, completed))} requests: their p99 is (close "
        "to) their largest value, noise rather than a tail; bench at least 100 requests per level "
        "(--requests) to read p99."
    ]
