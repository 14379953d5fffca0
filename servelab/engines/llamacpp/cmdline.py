"""Reading a llama-server command line: the flags that decide context, slots, KV type and drafts.

Spellings from ``llama-server --help`` of the pinned build (b1-0c1e570) and older builds (``-fa`` as a
bare switch, ``-md``/``--model-draft``).
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from servelab.engines.base import LaunchSettings
from servelab.engines.flags import Flag, check_setting_words, is_on, scan, to_int
from servelab.engines.images import image_tag
from servelab.engines.llamacpp import DEFAULT_PORT
from servelab.engines.llamacpp.settings import LlamaCppSettings

if TYPE_CHECKING:
    from servelab.model.spec import ModelSpec
    from servelab.sizing.fit import PlanSettings, Speculative

FLAGS = (
    Flag(("-c", "--ctx-size"), "ctx_size"),
    Flag(("-np", "--parallel"), "parallel"),
    Flag(("-kvu", "--kv-unified"), "kv_unified", value=True),
    Flag(("-no-kvu", "--no-kv-unified"), "kv_unified", value=False),
    Flag(("--kv-unified-per-slot",), "kv_unified_per_slot"),
    Flag(("-ctk", "--cache-type-k"), "cache_type_k"),
    Flag(("-ctv", "--cache-type-v"), "cache_type_v"),
    Flag(("-ngl", "--gpu-layers", "--n-gpu-layers"), "gpu_layers"),
    Flag(("-fa", "--flash-attn"), "flash_attn", optional_values=("on", "off", "auto")),
    Flag(("-m", "--model"), "model"),
    Flag(("-a", "--alias"), "alias"),
    Flag(("-md", "--model-draft", "--spec-draft-model"), "draft_model"),
    Flag(("--spec-type",), "spec_type"),
    Flag(("--spec-draft-n-max", "--draft-max", "--draft", "--draft-n"), "draft_max"),
    Flag(("-b", "--batch-size"), "batch_size"),
    Flag(("-ub", "--ubatch-size"), "ubatch_size"),
    Flag(("--n-cpu-moe", "-ncmoe"), "n_cpu_moe"),
    Flag(("--cpu-moe", "-cmoe"), "cpu_moe", value=True),
    Flag(("-ot", "--override-tensor"), "override_tensor"),
    Flag(("--host",), "host"),
    Flag(("--port",), "port"),
)
# the flags servelab's own options set (`servelab plan … -- WORDS` takes only the others)
SHARED_FLAGS = {
    "ctx_size": "--context",
    "parallel": "--parallel",
    "cache_type_k": "--kv-dtype",
    "model": "MODEL",
    "spec_type": "--speculative",
    "host": "--host",
    "port": "--port",
}
PROGRAM_NAMES = ("llama-server", "server")
LAUNCH_FORMS = ("llama-server …",)
IMAGE_WORDS = ("llama.cpp", "llama-cpp", "llamacpp")
# llama-server reads these environment variables as flags; a flag on the command line wins (`--help`).
ENV_FLAGS = {
    "LLAMA_ARG_CTX_SIZE": "-c",
    "LLAMA_ARG_N_PARALLEL": "-np",
    "LLAMA_ARG_KV_UNIFIED_PER_SLOT": "--kv-unified-per-slot",
    "LLAMA_ARG_CACHE_TYPE_K": "-ctk",
    "LLAMA_ARG_CACHE_TYPE_V": "-ctv",
    "LLAMA_ARG_N_GPU_LAYERS": "-ngl",
    "LLAMA_ARG_FLASH_ATTN": "-fa",
    "LLAMA_ARG_MODEL": "-m",
    "LLAMA_ARG_ALIAS": "-a",
    "LLAMA_ARG_SPEC_DRAFT_MODEL": "-md",
    "LLAMA_ARG_BATCH": "-b",
    "LLAMA_ARG_UBATCH": "-ub",
    "LLAMA_ARG_N_CPU_MOE": "--n-cpu-moe",
    "LLAMA_ARG_HOST": "--host",
    "LLAMA_ARG_PORT": "--port",
}


@dataclass(frozen=True, kw_only=True)
class LlamaCppLaunch:
    """What a llama-server command line asked for. None: not given (the server's default applies)."""

    ctx_size: int | None = None
    parallel: int | None = None
    kv_unified: bool | None = None
    kv_unified_per_slot: int | None = None
    cache_type_k: str | None = None
    cache_type_v: str | None = None
    gpu_layers: str | None = None
    flash_attn: bool | None = None
    flash_attn_mode: str | None = None  # -fa as written: on, off or auto (a bare -fa: on)
    model: str | None = None
    alias: str | None = None
    draft_model: str | None = None
    spec_type: str | None = None
    draft_max: int | None = None
    batch_size: int | None = None
    ubatch_size: int | None = None
    n_cpu_moe: int | None = None
    cpu_moe: bool | None = None  # --cpu-moe, or -ot exps=CPU
    host: str | None = None
    port: int | None = None


def recognises(argv: list[str]) -> bool:
    """True when the command runs llama-server (or a build's bare ``server``)."""
    return bool(argv) and os.path.basename(argv[0]) in PROGRAM_NAMES


def env_words(environment: dict[str, str] | None) -> list[str]:
    """LLAMA_ARG_* variables as the flags they stand for."""
    words: list[str] = []
    for name, value in (environment or {}).items():
        if name in ENV_FLAGS:
            words += [ENV_FLAGS[name], str(value)]
        elif name == "LLAMA_ARG_KV_UNIFIED":
            words.append("-kvu" if is_on(str(value)) else "-no-kvu")
    return words


def parse(argv: list[str], environment: dict[str, str] | None = None) -> LlamaCppLaunch:
    """Parse flags; ``argv`` may start with the program or be flags only (a compose ``command:``).

    ``environment``: LLAMA_ARG_* variables, overridden by the same flag on the command line.
    """
    words = env_words(environment) + (argv[1:] if recognises(argv) else argv)
    found, _ = scan(words, FLAGS)
    return LlamaCppLaunch(
        ctx_size=to_int(found, "ctx_size", "-c/--ctx-size"),
        parallel=to_int(found, "parallel", "-np/--parallel"),
        kv_unified=found.get("kv_unified"),
        kv_unified_per_slot=to_int(found, "kv_unified_per_slot", "--kv-unified-per-slot"),
        cache_type_k=found.get("cache_type_k"),
        cache_type_v=found.get("cache_type_v"),
        gpu_layers=found.get("gpu_layers"),
        flash_attn=is_on(found.get("flash_attn")),
        flash_attn_mode=_fa_mode(found.get("flash_attn")),
        model=found.get("model"),
        alias=found.get("alias"),
        draft_model=found.get("draft_model"),
        spec_type=found.get("spec_type"),
        draft_max=to_int(found, "draft_max", "--spec-draft-n-max"),
        batch_size=to_int(found, "batch_size", "-b/--batch-size"),
        ubatch_size=to_int(found, "ubatch_size", "-ub/--ubatch-size"),
        n_cpu_moe=to_int(found, "n_cpu_moe", "--n-cpu-moe"),
        cpu_moe=True if found.get("cpu_moe") or _experts_on_cpu(found.get("override_tensor")) else None,
        host=found.get("host"),
        port=to_int(found, "port", "--port"),
    )


def _fa_mode(value: object) -> str | None:
    """-fa's mode as written: a bare -fa (older builds' switch) is on, LLAMA_ARG_FLASH_ATTN's 1/true/enabled too;
    None when not given."""
    if value is None:
        return None
    text = "on" if value is True else str(value).lower()
    return text if text in ("on", "off", "auto") else ("on" if is_on(text) else "off")


def _experts_on_cpu(override: str | None) -> bool:
    """-ot exps=CPU (what --cpu-moe stands for): every layer's routed experts in host RAM."""
    return bool(override) and any(
        part.strip().lower() in ("exps=cpu", r"\.ffn_(up|down|gate)_exps=cpu")
        for part in str(override).split(",")
    )


def engine_settings(launch: LlamaCppLaunch, *, speculative: bool = True) -> LlamaCppSettings:
    """The launch's llama.cpp-only knobs as its Settings: what its flags give, nothing filled in (`speculative`
    False: without its draft)."""
    v = (
        launch.cache_type_v
        if launch.cache_type_v and launch.cache_type_v != (launch.cache_type_k or "f16")
        else None
    )
    return LlamaCppSettings(
        n_gpu_layers=_gpu_layers(launch.gpu_layers),
        n_batch=launch.batch_size,
        n_ubatch=launch.ubatch_size,
        kv_unified=bool(launch.kv_unified),
        n_cpu_moe=launch.n_cpu_moe,
        cpu_moe=bool(launch.cpu_moe),
        flash_attn=launch.flash_attn_mode,
        kv_dtype_v=v,
        model_draft=launch.draft_model if speculative else None,
        draft_max=launch.draft_max if speculative else None,
    )


def settings(argv: list[str], environment: dict[str, str] | None = None) -> LlamaCppSettings:
    """The words after `servelab plan … --` (flags only, llama-server's spelling) as llama.cpp's Settings."""
    check_setting_words(argv, FLAGS, SHARED_FLAGS, "llama.cpp")
    return engine_settings(parse(argv, environment))


def expectations(launch: LlamaCppLaunch) -> dict[str, Any]:
    """What the user meant, in verify's keys. ``-c N`` means N tokens per request, whatever -np does to it."""
    asked: dict[str, Any] = {}
    if launch.ctx_size:  # -c 0 means "the model's own", nothing to check
        asked["context"] = min(launch.ctx_size, launch.kv_unified_per_slot or launch.ctx_size)
    elif launch.kv_unified_per_slot:
        asked["context"] = launch.kv_unified_per_slot
    if launch.parallel and launch.parallel > 0:
        asked["slots"] = launch.parallel
    if launch.cache_type_k:
        asked["kv_dtype"] = launch.cache_type_k
    if launch.alias or launch.model:
        asked["model"] = (launch.alias or "").split(",")[0] or os.path.basename(launch.model or "")
    if launch.draft_model or (launch.spec_type and launch.spec_type != "none"):
        asked["speculative"] = True
    return asked


AUTO_SLOTS = (
    4  # -np -1 (the default): "using n_parallel = 4 and kv_unified = true" (docs/reference/memory.md §4)
)


def plan_settings(launch: LlamaCppLaunch) -> LaunchSettings:
    """The launch as the planner sees it: what one request gets from -c and -np (-c is shared by the slots
    unless the KV is unified; the planner's warning says so), the KV type, -ngl (`--help` of the pinned build:
    -c 0 = the model's, -np -1 = auto, -kvu on when the slots are auto)."""
    auto = launch.parallel is None or launch.parallel <= 0
    slots = AUTO_SLOTS if auto else launch.parallel or 1
    unified = launch.kv_unified if launch.kv_unified is not None else auto
    ctx = launch.ctx_size or None
    notes: list[str] = []
    context = ctx if ctx is None or unified else ctx // slots
    given = engine_settings(launch, speculative=False)  # the draft is not planned from a launch yet
    knobs = dataclasses.replace(  # unset: the server's auto
        given, kv_unified=unified, flash_attn=given.flash_attn or "auto"
    )
    return LaunchSettings(
        model=launch.model,
        context=context,
        parallel=slots,
        kv_dtype=launch.cache_type_k,
        engine=knobs,
        notes=tuple(notes),
    )


def _gpu_layers(value: str | None) -> int | None:
    """-ngl N, `all` (-1: every layer) or `auto` (None: the planner decides)."""
    if value is None or value == "auto":
        return None
    if value == "all":
        return -1
    return to_int({"ngl": value}, "ngl", "-ngl/--gpu-layers")


# The writer: the launch words `servelab plan` emits (formerly recipe.py).
def gguf_path(model_path: str, quant: str) -> str:
    """The -m argument: the .gguf itself, or a placeholder path named after a catalog id and quant."""
    if model_path.lower().endswith(".gguf"):
        return model_path
    return f"models/{model_path.rstrip('/').split('/')[-1]}-{quant}.gguf"


def plan_command(
    model: ModelSpec,
    s: PlanSettings[LlamaCppSettings],
    *,
    n_ctx: int,
    cache_type_k: str,
    cache_type_v: str,
    on_gpu: bool,
) -> list[str]:
    """The llama-server words of a plan's settings (both planners); on the CPU device (``on_gpu`` false) -ngl 0
    and none of the GPU-side words (-b/-ub, expert offload, the layer split, a draft)."""
    e = s.engine
    common: dict[str, Any] = dict(
        n_ctx=n_ctx,
        quant=model.quant,
        n_parallel=s.parallel,
        kv_unified=e.kv_unified,
        cache_type_k=cache_type_k,
        cache_type_v=cache_type_v,
        flash_attn=(e.flash_attn or "on").lower(),
        host=s.host,
        port=s.port or DEFAULT_PORT,
    )
    if not on_gpu:
        return command(s.model_path, n_gpu_layers=0, **common)
    return command(
        s.model_path,
        n_gpu_layers=e.n_gpu_layers,
        n_batch=e.n_batch,
        n_ubatch=e.n_ubatch,
        n_cpu_moe=None if e.cpu_moe else e.n_cpu_moe,
        cpu_moe=e.cpu_moe,
        tp=s.tp,
        draft=s.speculative,
        **common,
    )


def command(
    model_path: str,
    *,
    n_ctx: int,
    quant: str = "",
    n_parallel: int = 1,
    kv_unified: bool = False,
    cache_type_k: str = "f16",
    cache_type_v: str = "f16",
    n_gpu_layers: int | None = None,
    flash_attn: str = "on",
    n_batch: int | None = None,
    n_ubatch: int | None = None,
    n_cpu_moe: int | None = None,
    cpu_moe: bool = False,
    tp: int = 1,
    draft: Speculative | None = None,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
) -> list[str]:
    """argv for llama-server; pass it through shlex.join to print it. -np is always explicit (the default is 4
    slots sharing one unified pool)."""
    argv = [
        "llama-server",
        "-m",
        gguf_path(model_path, quant),
        "--host",
        host,
        "--port",
        str(port),
        "-c",
        str(n_ctx),
        "-np",
        str(n_parallel),
        "-ngl",
        str(999 if n_gpu_layers is None else n_gpu_layers),
        "-fa",
        flash_attn,
    ]
    if kv_unified:
        argv.append("--kv-unified")
    if cache_type_k != "f16":
        argv += ["-ctk", cache_type_k]
    if cache_type_v != "f16":
        argv += ["-ctv", cache_type_v]
    if n_batch is not None:
        argv += ["-b", str(n_batch)]
    if n_ubatch is not None:
        argv += ["-ub", str(n_ubatch)]
    if cpu_moe:  # every layer's routed experts in host RAM (= --cpu-moe)
        argv += ["-ot", "exps=CPU"]
    elif n_cpu_moe:
        argv += ["--n-cpu-moe", str(n_cpu_moe)]
    if tp > 1:  # llama.cpp splits by layers (pipeline), not tensor parallel
        argv += ["--split-mode", "layer", "--tensor-split", ",".join(["1"] * tp)]
    if draft is not None:  # common/arg.cpp: --draft-max was removed for --spec-draft-n-max
        argv += ["-md", draft.draft_path, "--spec-draft-n-max", str(draft.num_tokens)]
    return argv


_BUILD_TAG = re.compile(r"(?:^|-)(b\d{4,})(?=$|-)")


def image_version(image: str) -> str | None:
    """The llama.cpp build an image tag names (``ghcr.io/ggml-org/llama.cpp:server-cuda-b5466`` → ``b5466``);
    None for the moving tags (server, server-cuda, full …)."""
    found = _BUILD_TAG.search(image_tag(image))
    return found.group(1) if found else None
