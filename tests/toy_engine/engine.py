"""The toy engine's contract value (servelab/engines/base.py), built only from this package."""

from __future__ import annotations

from servelab.engines.base import Engine, Planner
from servelab.engines.openai import bench_extras
from servelab.sizing.efficiency import EfficiencyTable
from tests.toy_engine import cmdline, endpoints, launch, planner, scheduler, verify_rules
from tests.toy_engine.settings import ToyFigures, ToyReported, ToySettings

ENGINE = Engine(
    name="toy",
    label="ToyServe",
    aliases=("toy-serve",),
    endpoints=endpoints,
    verify_rules=verify_rules,
    bench_extras=bench_extras,
    default_port=9999,
    cmdline=cmdline,
    launcher=launch,
    planner=Planner(
        plan=planner.plan,
        weight_formats="hf",
        usual_quants=("bf16",),
        prefill_chunk_tokens=1024,
        decode_efficiency=EfficiencyTable("ToyServe", 0.5, "a toy figure", ()),
        prefill_efficiency=0.25,
        settings_type=ToySettings,
        settings=cmdline.settings,
        figures_type=ToyFigures,
    ),
    signatures="tests.toy_engine",
    scheduler=scheduler.scheduler,
    reported_type=ToyReported,
)
