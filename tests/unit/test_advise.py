"""`servelab advise`'s pure core: SLO parsing and checking, the load search, cost, ranking, the Pareto front, and
the planner's pruning reasons (exact values)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from servelab.advise.candidates import GridPoint, Variant, advisable, grid, tensor_parallel_sizes
from servelab.advise.goal import Bound, Prices, cost_per_million, misses, parse_bounds
from servelab.advise.judge import Judged
from servelab.advise.rank import dominates, objectives, pareto, ranked, scores
from servelab.advise.search import Capacity, highest_passing
from servelab.errors import ConfigError
from servelab.hardware.gpus import card_for
from servelab.model.load import load_model
from servelab.plan.make import make_plan
from servelab.results.level_key import Level
from servelab.results.stats import Distribution, LevelStats


def test_slo_keys_parse_to_percentile_bounds() -> None:
    assert parse_bounds("ttft_p99_ms=2000, tpot_p50_ms=40,e2e_p99_9_ms=9000") == (
        Bound("ttft_ms", 99.0, 2000.0),
        Bound("tpot_ms", 50.0, 40.0),
        Bound("e2e_ms", 99.9, 9000.0),
    )
    assert Bound("e2e_ms", 99.9, 1.0).key == "e2e_p99_9_ms"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("ttft_ms=500", "unknown SLO 'ttft_ms=500' in --slo"),
        ("speed_p99_ms=5", "unknown SLO 'speed_p99_ms=5'"),
        ("ttft_p98_ms=5", "unknown SLO 'ttft_p98_ms=5'"),
        ("ttft_p99_ms=fast", "bad number 'fast' for ttft_p99_ms in --slo"),
        ("ttft_p99_ms=-3", "--slo ttft_p99_ms must be a number"),
    ],
)
def test_bad_slo_is_one_config_error(text: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_bounds(text)
    assert says in str(caught.value)
    assert "\n" not in str(caught.value)


def _stats(ttft_p99: float | None, tpot_p99: float | None, errors: int = 0) -> LevelStats:
    return LevelStats(
        level=Level.closed(4),
        requests=64,
        completed=64 - errors,
        errors=errors,
        ttft_ms=Distribution(n=64, p99=ttft_p99),
        tpot_ms=Distribution(n=64, p99=tpot_p99),
    )


def test_misses_names_each_broken_slo_and_refusals() -> None:
    bounds = parse_bounds("ttft_p99_ms=2000,tpot_p99_ms=50")
    assert misses(bounds, _stats(1999.0, 50.0)) == ()
    assert misses(bounds, _stats(2400.4, 50.0)) == ("ttft_p99_ms 2400 > 2000",)
    assert misses(bounds, _stats(None, 51.0, errors=2)) == (
        "2 of 64 requests refused",
        "ttft_p99_ms none > 2000",
        "tpot_p99_ms 51 > 50",
    )


def test_users_search_on_a_synthetic_ladder_bisects_to_the_edge() -> None:
    asked: list[float] = []

    def passes(load: float) -> bool:
        asked.append(load)
        return load <= 11

    assert highest_passing(1, 64, passes, whole=True) == Capacity(11, 12, 8)
    assert asked == [64, 1, 32, 16, 8, 12, 10, 11]


def test_search_stops_at_a_met_demand_and_at_a_failed_floor() -> None:
    assert highest_passing(1, 16, lambda load: True, whole=True) == Capacity(16, None, 1)
    assert highest_passing(1, 16, lambda load: False, whole=True) == Capacity(None, 1, 2)
    assert highest_passing(1, 1, lambda load: False, whole=True) == Capacity(None, 1, 1)


def test_rate_search_brackets_within_the_tolerance() -> None:
    found = highest_passing(0.5, 32.0, lambda rate: rate <= 3.0, whole=False)
    assert found.load is not None and found.failing is not None
    assert found.load <= 3.0 < found.failing <= found.load * 1.05


def test_cost_per_million_output_tokens() -> None:
    assert Prices(2.0).per_hour(2, 450) == 4.0
    assert Prices(2.0, 0.3).per_hour(2, 450) == pytest.approx(4.27)  # 2 x (2 + 0.3 x 0.45)
    assert Prices(None, 0.2).per_hour(1, 700) == pytest.approx(0.14)
    assert Prices().per_hour(4, 450) is None
    assert cost_per_million(4.0, 1000.0) == pytest.approx(1.1111111)  # 4 USD / 3.6 M tokens
    assert cost_per_million(4.0, 0.0) is None
    with pytest.raises(ConfigError, match="--price must be a number"):
        Prices(-1.0)


def test_tensor_parallel_sizes_are_powers_of_two_within_the_gpus() -> None:
    assert tensor_parallel_sizes(1) == (1,)
    assert tensor_parallel_sizes(6) == (1, 2, 4)


@pytest.fixture(scope="module")
def point() -> GridPoint:
    plan = make_plan(load_model("llama-3.2-1b"), card_for("rtx4090"), engine="vllm", context=2048)
    return GridPoint(plan, 1)


def _judged(point: GridPoint, name: str, per_gpu: float, ttft: float, tpot: float, gpus: int = 1) -> Judged:
    return Judged(
        point=replace(point, variant=Variant("vllm", (name,))),
        capacity=Capacity(4, None, 1),
        replicas=1,
        load=4,
        stats=_stats(ttft, tpot),
        failing_misses=(),
        output_tok_s=per_gpu * gpus,
        gpus_used=gpus,
        cost_per_mtok=cost_per_million(Prices(1.0).per_hour(gpus, None), per_gpu * gpus),
    )


def test_ranking_and_front_say_who_beats_whom(point: GridPoint) -> None:
    fast = _judged(point, "fast", 100.0, 500.0, 20.0)
    snappy = _judged(point, "snappy", 60.0, 100.0, 25.0)  # slower, but a shorter TTFT: on the front
    same = _judged(point, "same", 100.0, 500.0, 20.0)  # fast's figures: ties
    slow = _judged(point, "slow", 50.0, 600.0, 30.0, gpus=2)
    missed = replace(_judged(point, "missed", 500.0, 10.0, 1.0), lost="misses the SLO from 2 users")
    order = ranked([slow, snappy, missed, same, fast])
    assert [j.point.variant.words[0] for j in order] == ["fast", "same", "snappy", "slow"]
    assert dominates(fast, slow) and not dominates(fast, snappy) and not dominates(fast, same)
    pareto_front = pareto(order)
    assert pareto_front.front == (fast, snappy)
    assert [(a.point.variant.words[0], b.point.variant.words[0]) for a, b in pareto_front.dominated] == [
        ("same", "fast"),
        ("slow", "fast"),
    ]
    assert fast.cost_per_mtok == pytest.approx(1 / (100 * 3600) * 1e6)


def reference_pareto(order):
    """rank.pareto as first written: every objective computed again at every comparison."""
    front = []
    for j in order:
        winner = next((o for o in order if dominates(o, j)), None)
        winner = winner or next((f for f in front if objectives(f) == objectives(j)), None)
        if winner is None:
            front.append(j)
    beaten = [
        (j, next(f for f in front if dominates(f, j) or objectives(f) == objectives(j)))
        for j in order
        if not any(f is j for f in front)
    ]
    return front, beaten


@pytest.mark.parametrize("seed", range(4))
def test_the_front_is_the_one_at_a_time_references(point: GridPoint, seed: int) -> None:
    """pareto computes each objective once: the same front and the same winner for each loser as the
    reference, on figures from few values (so ties and partial dominance are common)."""
    import random

    rng = random.Random(seed)
    judged = [
        _judged(
            point,
            f"c{k}",
            rng.choice((50.0, 60.0, 80.0, 100.0)),
            rng.choice((100.0, 300.0, 500.0, 700.0)),
            rng.choice((20.0, 25.0, 30.0, 35.0)),
            gpus=rng.choice((1, 2)),
        )
        for k in range(24)
    ]
    order = ranked([*judged, _judged(point, "snappy", 40.0, 50.0, 10.0)])  # on the front whatever the rest
    front, beaten = reference_pareto(order)
    pareto_front = pareto(order)
    assert list(pareto_front.front) == front and 1 < len(front) < len(order)
    assert [(id(a), id(b)) for a, b in pareto_front.dominated] == [(id(a), id(b)) for a, b in beaten]


def _banded(
    point: GridPoint,
    name: str,
    engine: str,
    per_gpu: float,
    ttft: float,
    goodput: tuple[float, float] = (0.5, 1.5),
    ttft_band: tuple[float, float] = (0.5, 2.0),
    over: tuple[str, ...] = (),
) -> Judged:
    """A candidate priced by the corpus fit: its goodput and p99 TTFT with band factors (TPOT without one)."""
    from servelab.advise.bands import Bands

    j = _judged(point, name, per_gpu, ttft, 20.0)
    plan = replace(j.point.plan, engine=engine)
    return replace(
        j,
        point=replace(j.point, plan=plan),
        effective_source="corpus",
        bands=Bands(goodput, (("ttft_ms", ttft_band),)),
        over_band=over,
    )


def test_across_engines_a_difference_inside_both_bands_is_a_statistical_tie(point: GridPoint) -> None:
    """llama.cpp predicted faster than sglang, but within both goodput bands and with overlapping TTFT bands:
    neither dominates, both stay on the front, the second marked within the first's band; the order is by the
    goodput each can be counted on for (the band's lower edge), here the reverse of the predictions'."""
    slots = _banded(point, "slots", "llamacpp", 224.0, 3000.0, goodput=(0.47, 1.63))
    batching = _banded(point, "batching", "sglang", 200.0, 2700.0, goodput=(0.8, 1.2))
    assert not dominates(slots, batching) and not dominates(batching, slots)
    order = ranked([slots, batching])
    assert order == [batching, slots]  # 160 tok/s at least against 105
    verdict = pareto(order)
    assert verdict.front == (batching, slots) and verdict.dominated == ()
    assert verdict.ties == ((slots, batching),)


def test_beyond_both_bands_or_within_one_engines_band_the_better_one_dominates(point: GridPoint) -> None:
    slow = _banded(point, "slow", "sglang", 50.0, 3000.0, goodput=(0.8, 1.2))
    fast = _banded(point, "fast", "llamacpp", 224.0, 3000.0, goodput=(0.47, 1.63), ttft_band=(0.8, 1.25))
    assert dominates(fast, slow)  # 105 tok/s at least against 60 at most, TTFT no worse at the upper edge
    # one engine, one band: its error moves both alike, so 1% apart on the predictions is apart
    twin = _banded(point, "twin", "llamacpp", 222.0, 3000.0, goodput=(0.47, 1.63), ttft_band=(0.8, 1.25))
    assert dominates(fast, twin) and not dominates(twin, fast)
    verdict = pareto(ranked([slow, twin, fast]))
    assert verdict.front == (fast,) and verdict.ties == ()
    assert {(a.point.variant.words[0], b.point.variant.words[0]) for a, b in verdict.dominated} == {
        ("twin", "fast"),
        ("slow", "fast"),
    }


@pytest.mark.parametrize("seed", range(3))
def test_the_banded_front_is_the_pairwise_reference_and_the_rank_extends_dominance(
    point: GridPoint, seed: int
) -> None:
    """pareto (arrays) against `dominates` one pair at a time, on banded candidates of three engines with few
    distinct figures (so ties, shared bands and intransitive dominance are common); whoever dominates ranks
    higher."""
    import random

    rng = random.Random(seed)
    judged = [
        _banded(
            point,
            f"c{k}",
            rng.choice(("llamacpp", "sglang", "vllm")),
            rng.choice((50.0, 80.0, 100.0, 200.0)),
            rng.choice((100.0, 300.0, 900.0)),
            goodput=rng.choice(((0.5, 1.5), (0.9, 1.1))),
            ttft_band=rng.choice(((0.5, 2.0), (0.9, 1.2))),
            over=rng.choice(((), ("ttft_p99_ms 2000 > 1000",))),
        )
        for k in range(30)
    ]
    order = ranked(judged)
    front: list[Judged] = []
    for j in order:
        if any(dominates(o, j) for o in order):
            continue
        if not any(scores(f) == scores(j) and objectives(f) == objectives(j) for f in front):
            front.append(j)
    verdict = pareto(order)
    assert list(verdict.front) == front and 1 < len(front) < len(order)
    place = {id(j): k for k, j in enumerate(order)}
    for a in order:
        for b in order:
            if dominates(a, b):
                assert place[id(a)] < place[id(b)]
    for member, better in verdict.ties:
        assert place[id(better)] < place[id(member)] and not dominates(better, member)


def test_meeting_the_slo_at_the_bands_upper_edge_ranks_first(point: GridPoint) -> None:
    """A candidate whose p99 breaks the SLO at its band's upper edge ranks below one that holds it there, and
    one as good everywhere that is also safe dominates it."""
    risky = _banded(point, "risky", "sglang", 300.0, 900.0, over=("ttft_p99_ms 1800 > 1000",))
    sure = _banded(point, "sure", "llamacpp", 200.0, 400.0)
    assert not risky.safe_at_load and sure.safe_at_load
    assert ranked([risky, sure]) == [sure, risky]
    verdict = pareto(ranked([risky, sure]))
    assert verdict.front == (sure, risky) and verdict.ties == ()  # the safety tells them apart
    safe_twin = replace(risky, over_band=(), point=replace(risky.point, variant=Variant("vllm", ("twin",))))
    assert dominates(safe_twin, risky) and not dominates(risky, safe_twin)


def test_a_tails_band_is_its_median_figures_and_the_slo_is_judged_at_its_upper_edge() -> None:
    from servelab.advise.bands import Bands, over_band
    from servelab.predict.bands import Pricing, Provenance, tail_factors
    from servelab.predict.roofline import AchievedRates
    from servelab.predict.stepmodel import StepModel

    model = StepModel({}, {}, {"*|*|TTFT|*": (0.5, 3.0), "*|*|TPOT/ITL|*": (0.8, 1.5)})
    pricing = Pricing(
        AchievedRates(bandwidth_bytes_s=1e12, flops_s=1e14), Provenance("corpus", "fit"), model, "vllm", "hbm"
    )
    assert tail_factors(pricing, "ttft_ms", 4) == (0.5, 3.0)
    assert tail_factors(pricing, "chunk_gap_ms", 4) == (0.8, 1.5)  # an inter-token gap
    assert tail_factors(pricing, "e2e_ms", 4) == (0.5, 3.0)  # a TTFT and a decode: the envelope
    bounds = parse_bounds("ttft_p99_ms=2000,tpot_p99_ms=50")
    bands = Bands((0.9, 1.1), (("ttft_ms", (0.5, 3.0)), ("tpot_ms", (0.8, 1.5))))
    assert over_band(bounds, _stats(600.0, 30.0), bands) == ()
    assert over_band(bounds, _stats(700.0, 40.0), bands) == ("ttft_p99_ms 2100 > 2000", "tpot_p99_ms 60 > 50")
    assert over_band(bounds, _stats(700.0, 40.0), None) == ()  # no band: taken at its value


def test_the_planner_prunes_with_its_own_reason() -> None:
    model, gpu = load_model("Qwen/Qwen3.5-27B"), card_for("rtx4090")
    fitting, pruned = grid(
        model, gpu, gpus=1, context=4096, interconnect=None, engines=advisable(("vllm",)), batch_limits=(1,)
    )
    reasons = {p.name: p.reason for p in pruned}
    assert reasons["vllm bf16 kv=auto tp=1 slots=256"].startswith(
        "vLLM: No available memory for the cache blocks"
    )
    assert all(p.plan.fits for p in fitting)
    assert {p.plan.quant for p in fitting} == {"awq-w4g128"}


def test_open_loop_goodput_is_the_rate_times_the_mean_output() -> None:
    from servelab.advise.judge import level_output_tok_s
    from servelab.results.stats import TokenCounts

    stats = replace(_stats(10.0, 1.0), completed=64, tokens=TokenCounts(output=8192), output_tok_s=12902.4)
    assert level_output_tok_s(stats, 20.0, closed=False) == 2560.0  # 20 req/s x 128 tokens
    assert level_output_tok_s(stats, 20.0, closed=True) == 12902.4  # closed loop: the steady window's


def test_the_text_says_the_bands_the_safety_and_the_tie(point: GridPoint) -> None:
    from servelab.advise.core import Advice
    from servelab.advise.judge import Demand, Setting
    from servelab.bench.config import BenchConfig
    from servelab.cli.advise import _safety, lines

    sure = Capacity(4, None, 1)
    batching = replace(_banded(point, "batching", "sglang", 200.0, 2700.0, goodput=(0.8, 1.2)), safe=sure)
    slots = replace(_banded(point, "slots", "llamacpp", 224.0, 2000.0, goodput=(0.47, 1.63)), safe=sure)
    order = tuple(ranked([slots, batching]))
    assert order == (batching, slots)  # 160 tok/s per GPU at least against 105.3
    setting = Setting(
        model=load_model("llama-3.2-1b"),
        gpu=card_for("rtx4090"),
        gpus=1,
        bounds=parse_bounds("ttft_p99_ms=5000"),
        demand=Demand(users=4),
        prices=Prices(),
        config=BenchConfig(targets=("http://127.0.0.1:1",)),
    )
    advice = Advice(
        setting=setting,
        interconnect=None,
        context=2048,
        candidates=2,
        pruned=(),
        judged=order,
        order=order,
        pareto=pareto(order),
        seconds=0.0,
    )
    text = lines(advice)
    assert text[2].startswith(f"1. {batching.point.name}: 200.0 (160-240) tok/s per GPU")
    assert "p99 TTFT 2700 (1350-5400) ms" in text[2]
    assert (
        text[3]
        == "   safe at this load (every SLO met at the bands' upper edge); safe to 4 users per replica"
    )
    assert text[5].startswith(f"2. {slots.point.name}: 224.0 (105-365) tok/s per GPU")
    assert text[7] == (
        f"   within the error band of 1 ({batching.point.name}): a statistical tie, ranked by what each can be"
        " counted on for (goodput per GPU at least 105.3 against 160.0)"
    )
    risky = replace(batching, over_band=("ttft_p99_ms 5400 > 5000",), safe=Capacity(2, 3, 2), safe_replicas=2)
    assert _safety(risky, Demand(users=4)) == (
        "not safe at this load: at the bands' upper edge ttft_p99_ms 5400 > 5000; safe to 2 users per replica"
        " (2 replicas for the demand)"
    )
    nowhere = replace(risky, safe=Capacity(None, 2, 2), safe_replicas=None)
    assert _safety(nowhere, Demand(users=4)).endswith(
        "; no share of the demand is safe from 2 users per replica"
    )
