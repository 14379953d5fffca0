"""The analytic screen (advise/screen.py) never changes the answer: on several searches the front with the screen
equals the front without it, every emulated candidate lies within its bounds, and the screen does leave
candidates out. The search spread over local processes gives the same front as one process."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from servelab.advise.core import Advice, advise, candidate_best
from servelab.advise.goal import Prices, parse_bounds
from servelab.advise.judge import Demand, Judged, PromptPool, Setting
from servelab.advise.screen import floor_step_s
from servelab.advise.spread import runner
from servelab.bench.config import BenchConfig
from servelab.bench.workloads import WorkloadSpec
from servelab.hardware import bandwidth
from servelab.hardware.gpus import GPU, card_for, with_overrides
from servelab.model.load import load_model
from servelab.predict.machine import roofline
from servelab.scheduling.core import Request, Sequence, Step, Work

SEARCHES = {
    # one user at a tight TPOT on the CPU: most candidates' floor step misses it
    "cpu-one-user": ("Qwen/Qwen3-8B", "cpu", 1, "tpot_p99_ms=900", Demand(users=1), None, ("llamacpp",)),
    # eight users on a GPU, priced: dominance by best case does the work
    "gpu-eight-users": (
        "Qwen/Qwen3-8B",
        "rtx4090",
        1,
        "ttft_p99_ms=3000,tpot_p99_ms=60",
        Demand(users=8),
        2.0,
        ("sglang",),
    ),
    # open loop over two GPUs (tensor parallelism and replicas)
    "gpu-rate": ("Qwen/Qwen3-8B", "rtx4090", 2, "ttft_p99_ms=2000", Demand(rate=2.0), None, ("vllm",)),
}


CARDS: dict[str, GPU] = {}  # one CPU device for every search: its bandwidth is measured once


def _setting(model: str, gpu: str, gpus: int, slo: str, demand: Demand, price: float | None) -> Setting:
    config = BenchConfig(targets=("advise",), concurrency=(1,), workload=WorkloadSpec("short"), seed=0)
    card = CARDS.setdefault(gpu, card_for(gpu))
    return Setting(
        model=load_model(model),
        gpu=card,
        gpus=gpus,
        bounds=parse_bounds(slo),
        demand=demand,
        prices=Prices(price),
        config=config,
    )


def _search(name: str, *, screen: bool, jobs: int = 1) -> Advice:
    model, gpu, gpus, slo, demand, price, engines = SEARCHES[name]
    run = runner(jobs)
    try:
        return advise(
            _setting(model, gpu, gpus, slo, demand, price),
            context=1024,
            engines=engines,
            screen=screen,
            runner=run,
        )
    finally:
        run.close()


@pytest.fixture(scope="module", autouse=True)
def _cpu_card(tmp_path_factory: pytest.TempPathFactory, _host_bandwidth_json: bytes) -> Iterator[None]:
    """The CPU device from this run's one bandwidth probe (conftest), in a cache folder of the module's own."""
    folder = tmp_path_factory.mktemp("advise-screen-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SERVELAB_CACHE_DIR", str(folder))
        path = bandwidth.cache_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_host_bandwidth_json)
        CARDS["cpu"] = with_overrides(card_for("cpu"), bandwidth_gb_s=10.0)  # the same on every machine
    yield
    CARDS.clear()


def _front(advice: Advice) -> list[tuple[str, float, float | None, float | None, float | None]]:
    return [
        (j.point.name, j.per_gpu_tok_s, j.p99("ttft_ms"), j.p99("tpot_ms"), j.cost_per_mtok)
        for j in advice.pareto.front
    ]


@pytest.fixture(scope="module")
def unscreened(_cpu_card: None) -> dict[str, Advice]:
    return {name: _search(name, screen=False) for name in SEARCHES}


@pytest.mark.parametrize("name", sorted(SEARCHES))
def test_the_front_with_the_screen_equals_the_front_without_it(
    name: str, unscreened: dict[str, Advice]
) -> None:
    full, screened = unscreened[name], _search(name, screen=True)
    assert full.pareto.front and _front(screened) == _front(full)
    assert not full.screened
    emulated = {j.point.name for j in screened.judged}
    left_out = {s.name for s in screened.screened}
    assert not emulated & left_out
    assert left_out or name != "cpu-one-user"  # the CPU's floor steps break a tight TPOT: the screen acts
    assert emulated | left_out == {j.point.name for j in full.judged}
    missed = {j.point.name for j in full.judged if not j.meets}
    for s in screened.screened:  # what the SLO screen left out does miss when emulated
        if s.reason.startswith("misses the SLO at every load"):
            assert s.name in missed


@pytest.mark.parametrize("name", sorted(SEARCHES))
def test_every_emulated_candidate_lies_within_its_best_case(name: str, unscreened: dict[str, Advice]) -> None:
    advice = unscreened[name]
    s = advice.setting
    for j in advice.judged:
        best = _best(j, s)
        assert best is not None
        for metric in ("ttft_ms", "tpot_ms", "itl_ms"):
            for stats in filter(None, [j.stats]):
                low = getattr(stats, metric).min
                assert low is None or low >= best.floor_s * 1000, (j.point.name, metric)
        if j.meets:
            assert j.per_gpu_tok_s <= best.per_gpu_tok_s, j.point.name
            assert j.cost_per_mtok is None or j.cost_per_mtok >= (best.cost_per_mtok or 0.0)


def _best(j: Judged, s: Setting):
    return candidate_best(s, j.point, None, PromptPool())


def test_the_floor_step_is_the_cheapest_step_the_roofline_prices(unscreened: dict[str, Advice]) -> None:
    j = unscreened["gpu-eight-users"].judged[0]
    line = roofline(j.point.plan, load_model("Qwen/Qwen3-8B"), card_for("rtx4090"))
    floor = floor_step_s(line)
    request = Request(0, 0.0, tuple(range(100)), 50)
    for works in (
        [Work(Sequence(request=request), 1, 99)],
        [Work(Sequence(request=request), 1, c) for c in (0, 10, 500)],
        [Work(Sequence(request=request), 64, 0)],
    ):
        assert line.step_s(Step((tuple(works),))) >= floor
    assert floor > 0


def test_local_processes_give_the_same_front_as_one(unscreened: dict[str, Advice]) -> None:
    spread = _search("gpu-eight-users", screen=True, jobs=2)
    assert _front(spread) == _front(unscreened["gpu-eight-users"])


def test_jobs_out_of_range_is_one_line() -> None:
    from servelab.errors import ConfigError

    with pytest.raises(ConfigError, match="--jobs 0: give 1 to 256 processes"):
        runner(0)


def test_the_screen_keeps_its_verdict_in_the_json() -> None:
    advice = _search("cpu-one-user", screen=True)
    data = advice.to_json()
    assert data["screened"] and all(set(s) == {"candidate", "reason"} for s in data["screened"])
    assert replace(advice, screened=()).to_json()["screened"] == []
