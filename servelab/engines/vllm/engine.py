"""vLLM, as the registry sees it (the contract: servelab/engines/base.py)."""

from __future__ import annotations

from servelab.engines.base import Engine, Planner
from servelab.engines.vllm import (
    DEFAULT_PORT,
    HEALTH_PATH,
    IMAGE,
    bench_extras,
    cmdline,
    efficiency,
    endpoints,
    environment,
    install,
    launch,
    planner,
    scheduler,
    speculative,
    verify_rules,
)
from servelab.engines.vllm.reported import VllmReported
from servelab.engines.vllm.settings import VllmFigures, VllmSettings, speculative_words
from servelab.model.quant import USUAL_SAFETENSORS_QUANTS

ENGINE = Engine(
    name="vllm",
    label="vLLM",
    endpoints=endpoints,
    verify_rules=verify_rules,
    bench_extras=bench_extras,
    default_port=DEFAULT_PORT,
    health_path=HEALTH_PATH,
    image=IMAGE,
    model_scoped_endpoints=True,
    cmdline=cmdline,
    launcher=launch,
    installer=install,
    planner=Planner(
        plan=planner.plan,
        weight_formats="hf",
        usual_quants=USUAL_SAFETENSORS_QUANTS,
        prefill_chunk_tokens=2048,  # max_num_batched_tokens by default
        # measured share of peak bandwidth in decode / of peak tensor FLOPs in prefill (docs/reference/memory.md §7;
        # sglang/vLLM decode from the field report "close to the ceiling"; prefill ~50% of dense peak)
        kv_dtypes=("auto", "fp8", "fp8_e5m2"),  # --kv-cache-dtype choices the plan search tries
        decode_efficiency=efficiency.TABLE,
        prefill_efficiency=0.5,
        cpu_efficiency=(0.5, 0.3),  # on the CPU device (docs/planning.md "The CPU as a device")
        settings_type=VllmSettings,
        settings=cmdline.settings,
        speculative_words=speculative_words,
        figures_type=VllmFigures,
        launch_settings=cmdline.plan_settings,
        image_version=cmdline.image_version,
    ),
    signatures="servelab.engines.vllm",
    environment=environment,
    speculative=speculative,
    scheduler=scheduler.scheduler,
    reported_type=VllmReported,
)
