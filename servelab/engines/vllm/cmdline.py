"""Reading a vLLM launch command (``vllm serve MODEL …`` or ``python -m vllm.entrypoints.openai.api_server``).

Flag names from vllm/engine/arg_utils.py (EngineArgs.add_cli_args); ``--max-model-len`` takes vLLM's
human-readable numbers (``32k`` = 32000, ``32K`` = 32768).
"""

from __future__ import annotations

import dataclasses
import json
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
from servelab.engines.vllm import DEFAULT_PORT
from servelab.engines.vllm.memory import KV_DTYPES
from servelab.engines.vllm.settings import VllmSettings
from servelab.errors import ConfigError
from servelab.model.dtypes import engine_spelling

if TYPE_CHECKING:
    from servelab.sizing.fit import Speculative

FLAGS = (
    Flag(("--model",), "model"),
    Flag(("--served-model-name",), "served_model_name"),
    Flag(("--max-model-len",), "max_model_len"),
    Flag(("--max-num-seqs",), "max_num_seqs"),
    Flag(("--max-num-batched-tokens",), "max_num_batched_tokens"),
    Flag(("--kv-cache-memory-bytes",), "kv_cache_memory_bytes"),
    Flag(("--kv-cache-dtype",), "kv_cache_dtype"),
    Flag(("-tp", "--tensor-parallel-size"), "tp_size"),
    Flag(("--gpu-memory-utilization",), "gpu_memory_utilization"),
    Flag(("--quantization", "-q"), "quantization"),
    Flag(("--speculative-config", "--speculative_config"), "speculative_config"),
    Flag(("--compilation-config", "-cc"), "compilation_config"),
    Flag(("--attention-backend",), "attention_backend"),
    Flag(("--enable-prefix-caching",), "enable_prefix_caching", value=True),
    Flag(("--no-enable-prefix-caching",), "enable_prefix_caching", value=False),
    Flag(("--language-model-only",), "language_model_only", value=True),
    Flag(("--enforce-eager",), "enforce_eager", value=True),
    Flag(("--enable-expert-parallel", "-ep"), "enable_expert_parallel", value=True),
    Flag(("--limit-mm-per-prompt",), "limit_mm_per_prompt"),
    Flag(("--host",), "host"),
    Flag(("--port",), "port"),
)
# the flags servelab's own options set (`servelab plan … -- WORDS` takes only the others)
SHARED_FLAGS = {
    "model": "MODEL",
    "served_model_name": "MODEL",
    "max_model_len": "--context",
    "kv_cache_dtype": "--kv-dtype",
    "tp_size": "--gpus",
    "quantization": "--quant",
    "host": "--host",
    "port": "--port",
}
KV_CACHE_SPACE_VARIABLE = "VLLM_CPU_KVCACHE_SPACE"  # the CPU backend's KV pool, whole GiB (vllm/envs.py)
USE_V1_VARIABLE = "VLLM_USE_V1"  # bool(int(...)) in vllm/envs.py (docs/reference/memory.md: V1 on 0.7.x)
LAUNCH_FORMS = ("vllm serve …", "python -m vllm.entrypoints.openai.api_server …")
IMAGE_WORDS = ("vllm",)


@dataclass(frozen=True, kw_only=True)
class VllmLaunch:
    """What a vLLM command line asked for. None: not given."""

    model: str | None = None
    served_model_name: str | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    kv_cache_memory_bytes: int | None = None
    kv_cache_space_gib: int | None = None  # VLLM_CPU_KVCACHE_SPACE in its environment
    use_v1: bool | None = None  # VLLM_USE_V1 in its environment (None: unset, the release's default)
    kv_cache_dtype: str | None = None
    tp_size: int | None = None
    gpu_memory_utilization: float | None = None
    speculative_config: dict[str, Any] | None = None
    compilation_config: dict[str, Any] | None = None
    attention_backend: str | None = None
    quantization: str | None = None
    enable_prefix_caching: bool | None = None
    language_model_only: bool | None = None
    limit_mm_per_prompt: dict[str, Any] | None = None
    enforce_eager: bool | None = None
    enable_expert_parallel: bool | None = None
    host: str | None = None
    port: int | None = None

    @property
    def text_only(self) -> bool:
        """--language-model-only, or --limit-mm-per-prompt with every modality at 0: no vision-encoder profile."""
        if self.language_model_only:
            return True
        limits = self.limit_mm_per_prompt or {}
        return bool(limits) and "raw" not in limits and all(_no_items(v) for v in limits.values())


def recognises(argv: list[str]) -> bool:
    """True for ``vllm serve …`` and ``python… [-u] -m vllm.entrypoints.….api_server …`` (any path to either)."""
    program = os.path.basename(argv[0]) if argv else ""
    if program == "vllm":
        return argv[1:2] == ["serve"]
    return (python_module(argv) or "").startswith("vllm.entrypoints.")


def parse(argv: list[str], environment: dict[str, str] | None = None) -> VllmLaunch:
    """Parse flags; the environment carries the CPU backend's KV pool (VLLM_CPU_KVCACHE_SPACE)."""
    found, positionals = scan(argv, FLAGS)
    model = found.get("model") or _serve_positional(positionals)
    return VllmLaunch(
        model=model,
        served_model_name=found.get("served_model_name"),
        max_model_len=to_int(found, "max_model_len", "--max-model-len"),
        max_num_seqs=to_int(found, "max_num_seqs", "--max-num-seqs"),
        max_num_batched_tokens=to_int(found, "max_num_batched_tokens", "--max-num-batched-tokens"),
        kv_cache_memory_bytes=to_int(found, "kv_cache_memory_bytes", "--kv-cache-memory-bytes"),
        kv_cache_space_gib=_kv_cache_space(environment),
        use_v1=_use_v1(environment),
        kv_cache_dtype=found.get("kv_cache_dtype"),
        tp_size=to_int(found, "tp_size", "-tp/--tensor-parallel-size"),
        gpu_memory_utilization=to_float(found, "gpu_memory_utilization", "--gpu-memory-utilization"),
        speculative_config=_json_or_none(found.get("speculative_config")),
        compilation_config=_json_or_none(found.get("compilation_config")),
        attention_backend=found.get("attention_backend"),
        quantization=found.get("quantization"),
        enable_prefix_caching=_switch(found.get("enable_prefix_caching")),
        language_model_only=_switch(found.get("language_model_only")),
        limit_mm_per_prompt=_json_or_none(found.get("limit_mm_per_prompt")),
        enforce_eager=_switch(found.get("enforce_eager")),
        enable_expert_parallel=_switch(found.get("enable_expert_parallel")),
        host=found.get("host"),
        port=to_int(found, "port", "--port"),
    )


def _kv_cache_space(environment: dict[str, str] | None) -> int | None:
    """VLLM_CPU_KVCACHE_SPACE from the environment: whole GiB (vLLM reads an integer); None when unset."""
    value = str((environment or {}).get(KV_CACHE_SPACE_VARIABLE, "")).strip()
    if not value:
        return None
    if not value.isdigit():
        raise ConfigError(f"{KV_CACHE_SPACE_VARIABLE}={value!r}: give whole GiB (e.g. 4)")
    return int(value)


def _use_v1(environment: dict[str, str] | None) -> bool | None:
    """VLLM_USE_V1 from the environment as vLLM reads it (`bool(int(value))`); None when unset."""
    value = str((environment or {}).get(USE_V1_VARIABLE, "")).strip()
    if not value:
        return None
    try:
        return bool(int(value))
    except ValueError:
        raise ConfigError(f"{USE_V1_VARIABLE}={value!r}: vLLM reads an integer (0: V0, 1: V1)") from None


def engine_settings(launch: VllmLaunch, *, speculative: bool = True) -> VllmSettings:
    """The launch's vLLM-only knobs as its Settings: what its flags and environment give, nothing filled in
    (`speculative` False: without its --speculative-config)."""
    config = launch.speculative_config if speculative else None
    return VllmSettings(
        gpu_memory_utilization=launch.gpu_memory_utilization,
        max_num_seqs=launch.max_num_seqs,
        max_num_batched_tokens=launch.max_num_batched_tokens,
        kv_cache_memory_bytes=launch.kv_cache_memory_bytes,
        enable_prefix_caching=launch.enable_prefix_caching,  # a hybrid's mamba_cache_mode: 'align' when on
        language_model_only=launch.text_only,
        kv_cache_space_gib=launch.kv_cache_space_gib,
        use_v1=launch.use_v1,
        enforce_eager=bool(launch.enforce_eager),
        enable_expert_parallel=bool(launch.enable_expert_parallel),
        speculative_config=None if config is None else config.get("raw") or json.dumps(config),
        compilation_config=_json_text(launch.compilation_config),
        attention_backend=launch.attention_backend,
    )


def _json_text(value: dict[str, Any] | None) -> str | None:
    """A JSON flag's value as text again (its raw text when it did not parse)."""
    return None if value is None else value.get("raw") or json.dumps(value)


def settings(argv: list[str], environment: dict[str, str] | None = None) -> VllmSettings:
    """The words after `servelab plan … --` (flags only, vLLM's spelling) and the environment (its CPU backend's
    VLLM_CPU_KVCACHE_SPACE, VLLM_USE_V1) as vLLM's Settings."""
    check_setting_words(argv, FLAGS, SHARED_FLAGS, "vLLM")
    return engine_settings(parse(argv, environment))


def expectations(launch: VllmLaunch) -> dict[str, Any]:
    pairs = {
        "context": launch.max_model_len,
        "slots": launch.max_num_seqs,
        "kv_dtype": launch.kv_cache_dtype if launch.kv_cache_dtype != "auto" else None,
        "tp_size": launch.tp_size,
        "model": launch.served_model_name or launch.model,
        "speculative": True if launch.speculative_config else None,
    }
    return {k: v for k, v in pairs.items() if v is not None}


def plan_settings(launch: VllmLaunch) -> LaunchSettings:
    """The launch as the planner sees it: --max-model-len, --max-num-seqs (as the parallel sequences), KV dtype, TP,
    and its vLLM-only knobs."""
    quant = quant_of_flag(QUANTIZATION_FLAGS, launch.quantization)
    notes = []
    if launch.quantization and quant is None:
        notes.append(
            f"launch: --quantization {launch.quantization} is not a format servelab prices; planned"
            " with the checkpoint's own"
        )
    if launch.speculative_config:
        notes.append("launch: --speculative-config is not planned (the draft's weights and KV are left out)")
    return LaunchSettings(
        model=launch.model,
        context=launch.max_model_len,
        parallel=launch.max_num_seqs,
        kv_dtype=None if launch.kv_cache_dtype in (None, "auto") else launch.kv_cache_dtype,
        tp=launch.tp_size,
        quant=quant,
        # the launch's --parallel; its draft is not planned (the note)
        engine=dataclasses.replace(engine_settings(launch, speculative=False), max_num_seqs=None),
        notes=tuple(notes),
    )


def _serve_positional(positionals: list[str]) -> str | None:
    """``vllm serve MODEL``: the word after ``serve``."""
    if "serve" in positionals:
        index = positionals.index("serve")
        return positionals[index + 1] if index + 1 < len(positionals) else None
    return None


def _switch(value: object) -> bool | None:
    """A switch as scanned: True/False, or the text of ``--enable-prefix-caching=false``."""
    if value is None or isinstance(value, bool):
        return value
    return str(value).lower() not in ("false", "0", "no")


def _no_items(limit: object) -> bool:
    """A --limit-mm-per-prompt value that allows none: 0, or {"count": 0} (the per-modality options form)."""
    if isinstance(limit, dict):
        limit = limit.get("count")
    return isinstance(limit, int | float) and not isinstance(limit, bool) and limit == 0


def _json_or_none(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return {"raw": text}
    return value if isinstance(value, dict) else {"raw": text}


# The writer: the launch words `servelab plan` emits (formerly recipe.py).
QUANTIZATION_FLAGS = {
    "awq": "awq_marlin",
    "gptq": "gptq_marlin",
    "fp8": "fp8",
    "fp8-block": "fp8",
    "mxfp4": "mxfp4",
    "nvfp4": "modelopt_fp4",
}


def quantization_flag(quant: str) -> str | None:
    family = quant.lower().split("-w")[0]
    return QUANTIZATION_FLAGS.get(quant.lower()) or QUANTIZATION_FLAGS.get(family)


def command(
    model_path: str,
    *,
    quant: str,
    max_model_len: int,
    kv_cache_dtype: str,
    tp: int = 1,
    gpu_memory_utilization: float | None = None,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    kv_cache_memory_bytes: int | None = None,
    speculative: Speculative | None = None,
    speculative_text: str | None = None,
    enable_prefix_caching: bool | None = None,
    language_model_only: bool = False,
    enforce_eager: bool = False,
    enable_expert_parallel: bool = False,
    compilation_config: str | None = None,
    attention_backend: str | None = None,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
) -> list[str]:
    """argv for vLLM; pass it through shlex.join to print it."""
    argv = [
        "vllm",
        "serve",
        model_path,
        "--host",
        host,
        "--port",
        str(port),
        "--max-model-len",
        str(max_model_len),
    ]
    flag = quantization_flag(quant)
    if flag:
        argv += ["--quantization", flag]
    if kv_cache_dtype != "auto":
        argv += ["--kv-cache-dtype", engine_spelling(kv_cache_dtype, KV_DTYPES) or kv_cache_dtype]
    if gpu_memory_utilization is not None:
        argv += ["--gpu-memory-utilization", f"{gpu_memory_utilization:g}"]
    if max_num_seqs:
        argv += ["--max-num-seqs", str(max_num_seqs)]
    if max_num_batched_tokens:
        argv += ["--max-num-batched-tokens", str(max_num_batched_tokens)]
    if kv_cache_memory_bytes is not None:
        argv += ["--kv-cache-memory-bytes", str(kv_cache_memory_bytes)]
    if tp > 1:
        argv += ["--tensor-parallel-size", str(tp)]
    if speculative is not None:  # the asked JSON as given, else servelab's
        argv += ["--speculative-config", speculative_text or speculative_config(speculative)]
    if enable_prefix_caching is not None:
        argv.append("--enable-prefix-caching" if enable_prefix_caching else "--no-enable-prefix-caching")
    if language_model_only:
        argv.append("--language-model-only")
    if enforce_eager:
        argv.append("--enforce-eager")
    if enable_expert_parallel:
        argv.append("--enable-expert-parallel")
    if compilation_config is not None:
        argv += ["--compilation-config", compilation_config]
    if attention_backend is not None:
        argv += ["--attention-backend", attention_backend]
    return argv


SPECULATIVE_METHOD = {"mtp": "mtp", "eagle": "eagle", "ngram": "ngram", "draft": "draft_model"}


def speculative_config(spec: Speculative) -> str:
    """--speculative-config's JSON (vllm/config/speculative.py: method, num_speculative_tokens, model)."""
    config: dict[str, object] = {
        "method": SPECULATIVE_METHOD[spec.method],
        "num_speculative_tokens": spec.num_tokens,
    }
    if spec.draft_path:
        config["model"] = spec.draft_path
    return json.dumps(config, separators=(",", ":"))


def image_version(image: str) -> str | None:
    """The vLLM release an image tag names (``vllm/vllm-openai:v0.10.1`` → ``0.10.1``); None for latest/nightly."""
    return leading_release(image)
