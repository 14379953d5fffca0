"""The public measurement corpus as typed values: a source, the measurements read from it, their figures.

A corpus file (``data/<source id>.json``) is one published source: its URL, date and the client that
measured, and the rows read from it. Every row names the engine and its release, the model and weight
format, the GPU (a catalog name) and its count, the parallelism, the flags that matter, the workload and
the figures, with the verbatim lines the figures were read from. The loader (`corpus/load.py`) refuses a
row that lacks any of these, naming the file, the row and the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ENGINES = ("llama.cpp", "vllm", "sglang")
CLIENTS = (
    "llama-bench",
    "llama-batched-bench",
    "vllm bench serve",
    "benchmark_serving.py",
    "benchmark_throughput.py",
    "vllm bench latency",
    "sglang.bench_serving",
    "sglang.bench_one_batch",
    "sglang.bench_offline_throughput",
    "guidellm",
    "aiperf",
    "llmperf",
    "other",
)
MODEL_KINDS = ("dense", "moe", "hybrid")
BACKENDS = ("cuda", "rocm", "metal", "vulkan", "sycl", "cpu")
# The figures a row may carry; each is a median unless its name says mean. Milliseconds and tokens/s.
FIGURES = (
    "ttft_ms_median",
    "ttft_ms_mean",
    "ttft_ms_p99",
    "tpot_ms_median",
    "tpot_ms_mean",
    "tpot_ms_p99",
    "itl_ms_median",
    "itl_ms_mean",
    "output_tok_s",  # output tokens per second, all requests together
    "total_tok_s",  # prompt + output tokens per second
    "request_rate",  # finished requests per second
    "pp_tok_s",  # llama-bench ppN: prompt tokens per second
    "tg_tok_s",  # llama-bench tgN: generated tokens per second, one sequence
)
# GPU classes the cross-validation reports separately (`gpu_class`)
GPU_CLASSES = ("gddr", "hbm", "apple", "amd")


@dataclass(frozen=True)
class Source:
    id: str  # the file's stem
    url: str
    title: str
    published: str  # YYYY-MM-DD (YYYY-MM where the page gives no day)
    client: str  # one of CLIENTS
    notes: str = ""


@dataclass(frozen=True, kw_only=True)
class Workload:
    prompt_tokens: int  # input length (llama-bench: the N of ppN, 0 for a tg row)
    output_tokens: int  # output length (llama-bench: the N of tgN, 0 for a pp row)
    concurrency: int | None = None  # max concurrent requests (llama-bench: 1)
    request_rate: float | None = None  # requests/s offered (None: all at once / closed loop)
    num_prompts: int | None = None
    depth: int = 0  # llama-bench -d: tokens already in the context before the measured pp/tg
    dataset: str = ""  # "random", "sharegpt", "llama-bench" …
    batch: int | None = None  # llama-batched-bench / offline throughput: sequences in one batch


@dataclass(frozen=True, kw_only=True)
class Measurement:
    source: Source
    index: int  # the row's position in its file
    engine: str  # one of ENGINES
    engine_release: str  # as the source states it ("b6100", "0.10.1", "0.4.9.post2"); "unknown" if not stated
    backend: str  # one of BACKENDS
    model: str  # Hugging Face id or the GGUF's name as the source gives it
    model_kind: str  # one of MODEL_KINDS
    params_b: float  # total parameters, billions
    active_params_b: float  # parameters read per token (MoE: active), billions
    weight_format: str  # "Q4_0", "Q4_K_M", "bf16", "fp8", "awq", "gptq", "nvfp4", "mxfp4" …
    kv_dtype: str  # "f16", "bf16", "fp8", "q8_0" …
    gpu: (
        str | None
    )  # GPU catalog name (servelab/hardware/gpus.json); None: not in the catalog (kept, not fitted)
    gpu_label: str  # the GPU as the source names it, verbatim
    gpu_count: int
    tp: int = 1
    ep: int = 1
    pp: int = 1
    flags: dict[str, str | int | float | bool | None] = field(default_factory=dict)
    launch: str = ""  # the launch command as the source shows it, verbatim
    workload: Workload
    figures: dict[str, float]  # FIGURES name -> value
    verbatim: tuple[str, ...]  # the lines the figures were read from, as published
    excluded: str = ""  # why the row is kept out of fitting and medians ("" = used)

    @property
    def label(self) -> str:
        return f"{self.source.id}#{self.index}"
