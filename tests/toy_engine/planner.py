"""A toy allocation rule: weights + an f16 KV cache for one request must fit in 90% of the GPU."""

from __future__ import annotations

from servelab.hardware.gpus import GPU
from servelab.model.spec import ModelSpec
from servelab.sizing.fit import EngineFit, PlanSettings, memory_bytes, weight_split
from servelab.sizing.kv import kv_layout
from tests.toy_engine import cmdline
from tests.toy_engine.settings import DEFAULT_STEP_TOKENS, ToyFigures, ToySettings


def plan(model: ModelSpec, gpu: GPU, s: PlanSettings[ToySettings]) -> EngineFit:
    text, vision, mtp = weight_split(model, s.tp, vision=False, mtp=False)
    kv = kv_layout(model, "f16").bytes_for(s.context) * s.parallel
    memory = memory_bytes(gpu, text, vision, mtp, kv, 0, 0, gpu.runtime_context_bytes)
    step = s.engine.step_tokens
    argv = cmdline.command(s.model_path, ctx=s.context, host=s.host, port=s.port or 9999, step_tokens=step)
    fits = memory.total <= 0.9 * gpu.memory_bytes
    figures = ToyFigures(s.parallel, s.context, step or DEFAULT_STEP_TOKENS)
    return EngineFit(
        memory=memory,
        fits=fits,
        context_served=s.context,
        slots=s.parallel,
        kv_dtype="f16",
        figures=figures,
        argv=argv,
        warnings=[],
        max_batch=s.parallel,
    )
