"""How long the planner takes per catalog model (goal: under 1 s each).

Run: python benchmarks/plan_speed.py [--gpu NAME] [--repeat N]
Prints one row per catalog model: the time to load the model description, to make one plan, and to compare every
(engine, quant) candidate, each the median of --repeat runs on time.perf_counter_ns().
"""

from __future__ import annotations

import argparse
import statistics
import time

from servelab.hardware.gpus import find_gpu
from servelab.model.catalog import catalog_ids
from servelab.model.load import load_model
from servelab.plan.make import compare_plans, make_plan


def _median_ms(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter_ns()
        result = fn()
        times.append((time.perf_counter_ns() - start) / 1e6)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="h100-sxm")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    gpu = find_gpu(args.gpu)
    print(f"{'model':45} {'load ms':>9} {'plan ms':>9} {'compare ms':>11} {'plans':>6}  under 1 s")
    for model_id in catalog_ids():
        load_ms, model = _median_ms(lambda m=model_id: load_model(m), args.repeat)
        plan_ms, _ = _median_ms(lambda m=model: make_plan(m, gpu, engine="vllm", context=8192), args.repeat)
        compare_ms, plans = _median_ms(lambda m=model: compare_plans(m, gpu), args.repeat)
        total = load_ms + compare_ms
        print(
            f"{model_id:45} {load_ms:9.1f} {plan_ms:9.1f} {compare_ms:11.1f} {len(plans.plans):6}  "
            f"{'yes' if total < 1000 else 'NO'}"
        )


if __name__ == "__main__":
    main()
