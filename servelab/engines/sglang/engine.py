"""sglang, as the registry sees it (the contract: servelab/engines/base.py)."""

from __future__ import annotations

from servelab.engines.base import Engine, Planner
from servelab.engines.sglang import (
    DEFAULT_PORT,
    HEALTH_PATH,
    IMAGE,
    bench_extras,
    cmdline,
    efficiency,
    endpoints,
    environment,
    launch,
    planner,
    scheduler,
    speculative,
    verify_rules,
)
from servelab.engines.sglang.reported import SglangReported
from servelab.engines.sglang.settings import SglangFigures, SglangSettings, speculative_words
from servelab.model.quant import USUAL_SAFETENSORS_QUANTS

ENGINE = Engine(
    name="sglang",
    label="sglang",
    endpoints=endpoints,
    verify_rules=verify_rules,
    bench_extras=bench_extras,
    default_port=DEFAULT_PORT,
    health_path=HEALTH_PATH,
    image=IMAGE,
    model_scoped_endpoints=False,
    cmdline=cmdline,
    launcher=launch,
    planner=Planner(
        plan=planner.plan,
        weight_formats="hf",
        usual_quants=USUAL_SAFETENSORS_QUANTS,
        prefill_chunk_tokens=4096,  # chunked_prefill_size by default
        # measured share of peak bandwidth in decode / of peak tensor FLOPs in prefill (docs/reference/memory.md §7;
        # sglang/vLLM decode from the field report "close to the ceiling"; prefill ~50% of dense peak)
        kv_dtypes=("auto", "fp8_e5m2", "fp8_e4m3"),  # --kv-cache-dtype choices the plan search tries
        decode_efficiency=efficiency.TABLE,
        prefill_efficiency=0.5,
        settings_type=SglangSettings,
        settings=cmdline.settings,
        speculative_words=speculative_words,
        figures_type=SglangFigures,
        launch_settings=cmdline.plan_settings,
        image_version=cmdline.image_version,
    ),
    signatures="servelab.engines.sglang",
    environment=environment,
    speculative=speculative,
    scheduler=scheduler.scheduler,
    reported_type=SglangReported,
)
