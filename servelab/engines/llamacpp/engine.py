"""llama.cpp's llama-server, as the registry sees it (the contract: servelab/engines/base.py)."""

from __future__ import annotations

from servelab.engines.base import Engine, LogMemory, Planner
from servelab.engines.llamacpp import (
    DEFAULT_PORT,
    HEALTH_PATH,
    IMAGE,
    bench_extras,
    bench_replay,
    cmdline,
    efficiency,
    endpoints,
    fork,
    install,
    launch,
    logparse,
    planner,
    scheduler,
    speculative,
    verify_rules,
)
from servelab.engines.llamacpp.reported import LlamaCppReported
from servelab.engines.llamacpp.settings import LlamaCppFigures, LlamaCppSettings, speculative_words

GGUF_QUANTS = ("Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "IQ4_XS")

ENGINE = Engine(
    name="llamacpp",
    label="llama.cpp",
    aliases=("llama-server", "llama-cpp"),
    endpoints=endpoints,
    verify_rules=verify_rules,
    bench_extras=bench_extras,
    default_port=DEFAULT_PORT,
    health_path=HEALTH_PATH,
    image=IMAGE,
    cmdline=cmdline,
    launcher=launch,
    installer=install,
    planner=Planner(
        plan=planner.plan,
        weight_formats="gguf",
        usual_quants=GGUF_QUANTS,
        prefill_chunk_tokens=512,  # n_ubatch
        # measured share of peak bandwidth in decode / of peak tensor FLOPs in prefill (docs/reference/memory.md §7;
        # sglang/vLLM decode from the field report "close to the ceiling"; prefill ~50% of dense peak)
        kv_dtypes=("f16", "q8_0", "q4_0"),  # -ctk/-ctv types the plan search tries (quantized V: -fa on)
        decode_efficiency=efficiency.TABLE,
        prefill_efficiency=0.35,
        state_dtypes=("fp32", "fp32"),  # recurrent state is kept in f32 (docs/planning.md)
        tensor_parallel="layers",  # -sm layer: a pipeline, no all-reduce
        needs_cuda=False,
        cpu_efficiency=(0.7, 0.3),  # on the CPU device (docs/planning.md "The CPU as a device")
        settings_type=LlamaCppSettings,
        settings=cmdline.settings,
        speculative_words=speculative_words,
        figures_type=LlamaCppFigures,
        launch_settings=cmdline.plan_settings,
        image_version=cmdline.image_version,
    ),
    signatures="servelab.engines.llamacpp",
    speculative=speculative,
    scheduler=scheduler.scheduler,
    # ggml-cpu multiplies a one-token pass with vec_dot and a pass of two or more with llamafile's tinyBLAS
    # (ggml-cpu/llamafile/sgemm.cpp `llamafile_sgemm`: "only enable sgemm for prompt processing", n < 2 returns
    # false); measured here 9 ms at one token, 22.7 at two, 60 at sixteen (benchmarks/llamacpp_batch_steps.py)
    cpu_batched_path=True,
    # a decoded token's attention (the KV cache read query by query, after the matmuls) runs at 10.6 GFLOP/s on one
    # EPYC thread, 3.09 us per context token (benchmarks/llamacpp_attention_steps.py), against the 82.4 GFLOP/s
    # compute the same build and thread count calibrate to (benchmarks/predict_vs_measured.py): 0.129
    cpu_decode_attention=10.6 / 82.4,
    log_memory=LogMemory(logparse.log_memory_bytes, "start llama-server with -lv 4 to log them"),
    source_build=fork.source_build,
    reported_type=LlamaCppReported,
    bench_replay=bench_replay,
    cpu_threads=lambda n: (
        "-t",
        str(n),
    ),  # its default is the machine's physical cores, not the CPUs it may use
)
