"""`advise --ray local`: the emulations as Ray tasks on a Ray started here (the `ray` extra, no mock) give the same
front as one process."""

from __future__ import annotations

import pytest

from servelab.advise.core import advise
from servelab.advise.goal import Prices, parse_bounds
from servelab.advise.judge import Demand, Setting
from servelab.advise.spread import RayCluster, runner
from servelab.bench.config import BenchConfig
from servelab.bench.workloads import WorkloadSpec
from servelab.hardware.gpus import card_for
from servelab.model.load import load_model

pytestmark = pytest.mark.ray


def test_a_search_on_ray_gives_the_same_front_as_one_process() -> None:
    config = BenchConfig(targets=("advise",), concurrency=(1,), workload=WorkloadSpec("short"), seed=0)
    setting = Setting(
        model=load_model("Qwen/Qwen3-8B"),
        gpu=card_for("rtx4090"),
        gpus=2,
        bounds=parse_bounds("ttft_p99_ms=2000"),
        demand=Demand(users=8),
        prices=Prices(1.0),
        config=config,
    )
    here = advise(setting, context=1024, engines=("vllm",))
    cluster = runner(1, "local")
    assert isinstance(cluster, RayCluster) and cluster.workers >= 1
    try:
        spread = advise(setting, context=1024, engines=("vllm",), runner=cluster)
    finally:
        cluster.ray.shutdown()
    names = [(j.point.name, j.per_gpu_tok_s, j.p99("ttft_ms")) for j in spread.pareto.front]
    assert names == [(j.point.name, j.per_gpu_tok_s, j.p99("ttft_ms")) for j in here.pareto.front] and names
