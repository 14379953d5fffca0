"""Reading an sglang launch command (``python -m sglang.launch_server …`` or ``sglang serve …``).

Flag names from python/sglang/srt/server_args.py (ServerArgs.add_cli_args).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from servelab.engines.base import LaunchSettings
from servelab.engines.flags import (
    Flag,
    check_setting_words,
    python_module,
    quant_of_flag,
    scan,
    to_float,
    to_int,
)
from servelab.engines.images import leading_release
from servelab.engines.sglang import DEFAULT_PORT
from servelab.engines.sglang.settings import SglangSettings

if TYPE_CHECKING:
    from servelab.sizing.fit import Speculative

FLAGS = (
    Flag(("--model-path", "--model"), "model_path"),
    Flag(("--served-model-name",), "served_model_name"),
    Flag(("--context-length",), "context_length"),
    Flag(("--max-total-tokens",), "max_total_tokens"),
    Flag(("--max-running-requests",), "max_running_requests"),
    Flag(("--max-mamba-cache-size",), "max_mamba_cache_size"),
    Flag(("--kv-cache-dtype",), "kv_cache_dtype"),
    Flag(("--tp", "--tp-size", "--tensor-parallel-size"), "tp_size"),
    Flag(("--mem-fraction-static",), "mem_fraction_static"),
    Flag(("--attention-backend",), "attention_backend"),
    Flag(("--quantization",), "quantization"),
    Flag(("--speculative-algorithm",), "speculative_algorithm"),
    Flag(("--speculative-num-steps",), "speculative_num_steps"),
    Flag(("--speculative-eagle-topk",), "speculative_eagle_topk"),
    Flag(("--speculative-num-draft-tokens",), "speculative_num_draft_tokens"),
    Flag(("--speculative-draft-model-path", "--speculative-draft-model"), "speculative_draft_model_path"),
    Flag(("--chunked-prefill-size",), "chunked_prefill_size"),
    Flag(("--ep-size", "--ep", "--expert-parallel-size"), "ep_size"),
    Flag(("--disable-cuda-graph",), "disable_cuda_graph", value=True),
    Flag(("--disable-radix-cache",), "disable_radix_cache", value=True),
    Flag(("--host",), "host"),
    Flag(("--port",), "port"),
)
# the flags servelab's own options set (`servelab plan … -- WORDS` takes only the others)
SHARED_FLAGS = {
    "model_path": "MODEL",
    "served_model_name": "MODEL",
    "context_length": "--context",
    "max_running_requests": "--parallel",
    "kv_cache_dtype": "--kv-dtype",
    "tp_size": "--gpus",
    "quantization": "--quant",
    "host": "--host",
    "port": "--port",
}
LAUNCH_FORMS = ("python -m sglang.launch_server …", "sglang serve …")
IMAGE_WORDS = ("sglang",)


@dataclass(frozen=True, kw_only=True)
class SglangLaunch:
    """What an sglang command line asked for. None: not given."""

    model_path: str | None = None
    served_model_name: str | None = None
    context_length: int | None = None
    max_total_tokens: int | None = None
    max_running_requests: int | None = None
    max_mamba_cache_size: int | None = None
    kv_cache_dtype: str | None = None
    tp_size: int | None = None
    mem_fraction_static: float | None = None
    attention_backend: str | None = None
    quantization: str | None = None
    speculative_algorithm: str | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None
    speculative_draft_model_path: str | None = None
    chunked_prefill_size: int | None = None
    ep_size: int | None = None
    disable_cuda_graph: bool | None = None
    disable_radix_cache: bool | None = None
    host: str | None = None
    port: int | None = None


def recognises(argv: list[str]) -> bool:
    """True for ``sglang serve …`` and ``python… [-u] -m sglang.launch_server …`` (any path to either)."""
    program = os.path.basename(argv[0]) if argv else ""
    if program == "sglang":
        return argv[1:2] == ["serve"]
    return python_module(argv) == "sglang.launch_server"


def parse(argv: list[str], environment: dict[str, str] | None = None) -> SglangLaunch:
    """Parse flags (the environment carries none of these for this engine)."""
    found, _ = scan(argv, FLAGS)
    return SglangLaunch(
        model_path=found.get("model_path"),
        served_model_name=found.get("served_model_name"),
        context_length=to_int(found, "context_length", "--context-length"),
        max_total_tokens=to_int(found, "max_total_tokens", "--max-total-tokens"),
        max_running_requests=to_int(found, "max_running_requests", "--max-running-requests"),
        max_mamba_cache_size=to_int(found, "max_mamba_cache_size", "--max-mamba-cache-size"),
        kv_cache_dtype=found.get("kv_cache_dtype"),
        tp_size=to_int(found, "tp_size", "--tp"),
        mem_fraction_static=to_float(found, "mem_fraction_static", "--mem-fraction-static"),
        attention_backend=found.get("attention_backend"),
        quantization=found.get("quantization"),
        speculative_algorithm=found.get("speculative_algorithm"),
        speculative_num_steps=to_int(found, "speculative_num_steps", "--speculative-num-steps"),
        speculative_eagle_topk=to_int(found, "speculative_eagle_topk", "--speculative-eagle-topk"),
        speculative_num_draft_tokens=to_int(
            found, "speculative_num_draft_tokens", "--speculative-num-draft-tokens"
        ),
        speculative_draft_model_path=found.get("speculative_draft_model_path"),
        chunked_prefill_size=to_int(found, "chunked_prefill_size", "--chunked-prefill-size"),
        ep_size=to_int(found, "ep_size", "--ep-size"),
        disable_cuda_graph=True if found.get("disable_cuda_graph") else None,
        disable_radix_cache=True if found.get("disable_radix_cache") else None,
        host=found.get("host"),
        port=to_int(found, "port", "--port"),
    )


def engine_settings(launch: SglangLaunch, *, speculative: bool = True) -> SglangSettings:
    """The launch's sglang-only knobs as its Settings: what its flags give, nothing filled in (`speculative`
    False: without its --speculative-* flags)."""
    drafts: dict[str, Any] = {}
    if speculative:
        drafts = dict(
            speculative_algorithm=launch.speculative_algorithm,
            speculative_num_steps=launch.speculative_num_steps,
            speculative_eagle_topk=launch.speculative_eagle_topk,
            speculative_num_draft_tokens=launch.speculative_num_draft_tokens,
            speculative_draft_model_path=launch.speculative_draft_model_path,
        )
    return SglangSettings(
        mem_fraction_static=launch.mem_fraction_static,
        max_total_tokens=launch.max_total_tokens,
        max_mamba_cache_size=launch.max_mamba_cache_size,
        attention_backend=launch.attention_backend,
        chunked_prefill_size=launch.chunked_prefill_size,
        ep_size=launch.ep_size,
        disable_cuda_graph=bool(launch.disable_cuda_graph),
        disable_radix_cache=bool(launch.disable_radix_cache),
        **drafts,
    )


def settings(argv: list[str], environment: dict[str, str] | None = None) -> SglangSettings:
    """The words after `servelab plan … --` (flags only, sglang's spelling) as sglang's Settings."""
    check_setting_words(argv, FLAGS, SHARED_FLAGS, "sglang")
    return engine_settings(parse(argv, environment))


def expectations(launch: SglangLaunch) -> dict[str, Any]:
    """What the user meant, in verify's keys."""
    pairs = {
        "context": launch.context_length,
        "max_total_tokens": launch.max_total_tokens,
        "slots": launch.max_running_requests,
        "kv_dtype": launch.kv_cache_dtype if launch.kv_cache_dtype != "auto" else None,
        "tp_size": launch.tp_size,
        "model": launch.served_model_name or launch.model_path,
        "speculative": True if launch.speculative_algorithm else None,
    }
    return {k: v for k, v in pairs.items() if v is not None}


def plan_settings(launch: SglangLaunch) -> LaunchSettings:
    """The launch as the planner sees it: context, pool size, running requests, KV dtype, TP, mem fraction."""
    quant = quant_of_flag(QUANTIZATION_FLAGS, launch.quantization)
    notes = []
    if launch.quantization and quant is None:
        notes.append(
            f"launch: --quantization {launch.quantization} is not a format servelab prices; planned"
            " with the checkpoint's own"
        )
    if launch.speculative_algorithm:
        notes.append(
            f"launch: --speculative-algorithm {launch.speculative_algorithm} is not planned (the draft's"
            " weights and KV are left out)"
        )
    return LaunchSettings(
        model=launch.model_path,
        context=launch.context_length,
        parallel=launch.max_running_requests,
        kv_dtype=None if launch.kv_cache_dtype in (None, "auto") else launch.kv_cache_dtype,
        tp=launch.tp_size,
        quant=quant,
        engine=engine_settings(launch, speculative=False),  # its draft is not planned (the note)
        notes=tuple(notes),
    )


# The writer: the launch words `servelab plan` emits (formerly recipe.py).
QUANTIZATION_FLAGS = {
    "awq": "awq",
    "gptq": "gptq",
    "fp8": "fp8",
    "fp8-block": "fp8",
    "mxfp4": "mxfp4",
    "nvfp4": "modelopt_fp4",
}


def quantization_flag(quant: str) -> str | None:
    """--quantization value for a servelab quant name (None: bf16/fp16, nothing to pass)."""
    family = quant.lower().split("-w")[0]
    return QUANTIZATION_FLAGS.get(quant.lower()) or QUANTIZATION_FLAGS.get(family)


def command(
    model_path: str,
    *,
    quant: str,
    context_length: int,
    kv_cache_dtype: str,
    tp: int = 1,
    max_total_tokens: int | None = None,
    mem_fraction_static: float | None = None,
    max_mamba_cache_size: int | None = None,
    max_running_requests: int | None = None,
    attention_backend: str | None = None,
    speculative: Speculative | None = None,
    own: SglangSettings | None = None,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
) -> list[str]:
    """argv for sglang; pass it through shlex.join to print it. `own`: its Settings, for the flags the plan passes
    through as asked (chunked prefill, expert parallelism, graphs, the speculative words)."""
    argv = [
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        model_path,
        "--host",
        host,
        "--port",
        str(port),
    ]
    flag = quantization_flag(quant)
    if flag:
        argv += ["--quantization", flag]
    argv += ["--context-length", str(context_length)]
    if max_total_tokens:
        argv += ["--max-total-tokens", str(max_total_tokens)]
    if kv_cache_dtype != "auto":
        argv += ["--kv-cache-dtype", kv_cache_dtype]
    if mem_fraction_static is not None:
        argv += ["--mem-fraction-static", f"{mem_fraction_static:g}"]
    if max_running_requests:
        argv += ["--max-running-requests", str(max_running_requests)]
    if max_mamba_cache_size:
        argv += ["--max-mamba-cache-size", str(max_mamba_cache_size)]
    if attention_backend is not None:
        argv += ["--attention-backend", attention_backend]
    if tp > 1:
        argv += ["--tp", str(tp)]
    own = own or SglangSettings()
    if own.chunked_prefill_size is not None:
        argv += ["--chunked-prefill-size", str(own.chunked_prefill_size)]
    if own.ep_size is not None:
        argv += ["--ep-size", str(own.ep_size)]
    if own.disable_cuda_graph:
        argv.append("--disable-cuda-graph")
    if own.disable_radix_cache:
        argv.append("--disable-radix-cache")
    if own.speculative_algorithm is not None:
        argv += own_speculative_flags(own)
    elif speculative is not None:
        argv += speculative_flags(speculative)
    return argv


def own_speculative_flags(own: SglangSettings) -> list[str]:
    """The --speculative-* words as asked."""
    pairs = (
        ("--speculative-algorithm", own.speculative_algorithm),
        ("--speculative-draft-model-path", own.speculative_draft_model_path),
        ("--speculative-num-steps", own.speculative_num_steps),
        ("--speculative-eagle-topk", own.speculative_eagle_topk),
        ("--speculative-num-draft-tokens", own.speculative_num_draft_tokens),
    )
    return [word for flag, value in pairs if value is not None for word in (flag, str(value))]


SPECULATIVE_ALGORITHM = {"mtp": "NEXTN", "eagle": "EAGLE", "ngram": "NGRAM", "draft": "STANDALONE"}


def speculative_flags(spec: Speculative) -> list[str]:
    """sglang's speculative flags (server_args.py): a chain of num_tokens steps at top-k 1 verifies
    num_tokens + 1 tokens; NEXTN is sglang's name for the model's own MTP layers."""
    argv = ["--speculative-algorithm", SPECULATIVE_ALGORITHM[spec.method]]
    if spec.draft_path:
        argv += ["--speculative-draft-model-path", spec.draft_path]
    if spec.method != "ngram":
        argv += ["--speculative-num-steps", str(spec.num_tokens), "--speculative-eagle-topk", "1"]
    return [*argv, "--speculative-num-draft-tokens", str(spec.num_tokens + 1)]


def image_version(image: str) -> str | None:
    """The sglang release an image tag names (``lmsysorg/sglang:v0.4.8.post1-rocm630-srt`` → ``0.4.8.post1``);
    None for latest/dev."""
    return leading_release(image)
