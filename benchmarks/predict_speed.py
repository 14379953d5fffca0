"""How much faster than real time `servelab predict` runs the ladder: the virtual time of each run (first send
to last token, every level) over the wall time the emulation took (prompts built, records and level
statistics included; no store). The seed's ladder is 1,2,4,8,16 x 32 requests; issue 13 asks >= 1,000x.

    python benchmarks/predict_speed.py [--tries 3]
"""

from __future__ import annotations

import argparse
import time

from servelab.cli.bench import build_config
from servelab.hardware.gpus import card_for
from servelab.model.load import load_model
from servelab.plan.make import search_plan
from servelab.predict.machine import emulated_engine
from servelab.predict.run import PredictTarget, predict

CASES = (  # engine, quant, plan options
    ("vllm", "bf16", {}),
    ("sglang", "bf16", {}),
    ("llamacpp", "Q4_K_M", {"parallel": 16}),
)
WORKLOADS = ("short", "mixed", "shared-prefix", "multi-turn")


def virtual_s(result) -> float:
    levels = result.targets[0].levels
    return sum(lv.stats.duration_s for lv in levels)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=3, help="runs per case; the fastest counts")
    args = parser.parse_args()
    model, card = load_model("Qwen/Qwen3-8B"), card_for("rtx4090")
    print(f"{'engine':9} {'workload':14} {'virtual s':>10} {'wall ms':>8} {'speed-up':>9}")
    for engine_name, quant, options in CASES:
        plan = search_plan(model, card, engine=engine_name, quant=quant, context=8192, **options)
        engine = emulated_engine(plan, model, card)
        for workload in WORKLOADS:
            config = build_config(
                {"targets": ["predict"], "concurrency": "1,2,4,8,16", "workload": workload, "chat": True},
                None,
            )
            best, result = float("inf"), None
            for _ in range(args.tries):
                start = time.perf_counter()
                result = predict(
                    config,
                    engine,
                    PredictTarget(engine=engine_name, model=model.name, gpu=card.name, quant=quant),
                )
                best = min(best, time.perf_counter() - start)
            virtual = virtual_s(result)
            print(f"{engine_name:9} {workload:14} {virtual:10.1f} {best * 1e3:8.0f} {virtual / best:8.0f}x")


if __name__ == "__main__":
    main()
