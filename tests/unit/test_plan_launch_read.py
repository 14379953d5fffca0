"""A launch's words as plan settings (each engine's cmdline.plan_settings) and compose bind mounts."""

from __future__ import annotations

from pathlib import Path

from servelab.engines.llamacpp import cmdline as llamacpp
from servelab.engines.llamacpp.settings import LlamaCppSettings
from servelab.engines.sglang import cmdline as sglang
from servelab.engines.vllm import cmdline as vllm
from servelab.engines.vllm.settings import VllmSettings
from servelab.verify.compose import load_service


def test_llamacpp_slots_share_c_unless_unified_and_auto_means_four_unified() -> None:
    shared = llamacpp.plan_settings(
        llamacpp.parse(["llama-server", "-m", "m.gguf", "-c", "262144", "-np", "4"])
    )
    assert (shared.context, shared.parallel, shared.engine.kv_unified) == (65536, 4, False)
    auto = llamacpp.plan_settings(llamacpp.parse(["llama-server", "-c", "32768", "-ngl", "all"]))
    assert (auto.context, auto.parallel, auto.engine) == (
        32768,
        4,
        LlamaCppSettings(kv_unified=True, flash_attn="auto", n_gpu_layers=-1),  # no -fa: the server's auto
    )
    unified = llamacpp.plan_settings(
        llamacpp.parse(["-c", "8192", "-np", "2", "-kvu", "-ctk", "q8_0", "-ctv", "q4_0", "-fa", "off"])
    )
    assert (unified.context, unified.kv_dtype) == (8192, "q8_0")
    assert (unified.engine.kv_dtype_v, unified.engine.flash_attn) == ("q4_0", "off")
    model_context = llamacpp.plan_settings(llamacpp.parse(["llama-server", "-c", "0", "-np", "1"]))
    assert model_context.context is None  # -c 0: the model's own


def test_llamacpp_environment_flags_reach_the_plan() -> None:
    launch = llamacpp.parse(["llama-server"], {"LLAMA_ARG_CTX_SIZE": "16384", "LLAMA_ARG_N_PARALLEL": "2"})
    assert llamacpp.plan_settings(launch).context == 8192


def test_vllm_and_sglang_quantization_flags_map_back_to_formats() -> None:
    v = vllm.plan_settings(vllm.parse(["vllm", "serve", "m", "--quantization", "awq_marlin", "-tp", "4"]))
    assert (v.quant, v.tp, v.model) == ("awq", 4, "m")
    odd = vllm.plan_settings(vllm.parse(["vllm", "serve", "m", "--quantization", "hqq"]))
    assert odd.quant is None and "hqq" in odd.notes[0]
    s = sglang.plan_settings(
        sglang.parse(
            [
                "python",
                "-m",
                "sglang.launch_server",
                "--model-path",
                "m",
                "--quantization",
                "modelopt_fp4",
                "--kv-cache-dtype",
                "auto",
                "--max-running-requests",
                "8",
            ]
        )
    )
    assert (s.quant, s.kv_dtype, s.parallel) == ("nvfp4", None, 8)


def test_compose_bind_mounts_lead_container_paths_back_to_the_host(tmp_path: Path) -> None:
    compose = tmp_path / "compose.yml"
    compose.write_text(
        "services:\n  llama:\n    command: [-m, /models/sub/x.gguf]\n    volumes:\n"
        "      - ./models:/models:ro\n      - cache:/root/.cache\n"
        "      - {type: bind, source: /srv/deep, target: /models/sub}\n"
    )
    service = load_service(compose)
    assert service.volumes == (("./models", "/models"), ("/srv/deep", "/models/sub"))
    assert service.host_path("/models/sub/x.gguf", tmp_path) == Path("/srv/deep/x.gguf")  # the deepest mount
    assert service.host_path("/models/y.gguf", tmp_path) == tmp_path / "models" / "y.gguf"
    assert service.host_path("/elsewhere/z.gguf", tmp_path) is None
    assert service.host_path("relative.gguf", tmp_path) is None


def test_vllm_prefix_caching_switch_reaches_the_plan_and_back() -> None:
    on = vllm.plan_settings(vllm.parse(["vllm", "serve", "m", "--enable-prefix-caching"]))
    assert on.engine == VllmSettings(enable_prefix_caching=True)
    off = vllm.plan_settings(vllm.parse(["vllm", "serve", "m", "--no-enable-prefix-caching"]))
    assert off.engine == VllmSettings(enable_prefix_caching=False)
    assert vllm.plan_settings(vllm.parse(["vllm", "serve", "m"])).engine == VllmSettings()
    argv = vllm.command(
        "m", quant="bf16", max_model_len=4096, kv_cache_dtype="auto", enable_prefix_caching=True
    )
    assert vllm.parse(argv).enable_prefix_caching is True
    assert "--enable-prefix-caching" not in vllm.command(
        "m", quant="bf16", max_model_len=4096, kv_cache_dtype="auto"
    )


def test_image_tags_name_each_engines_release() -> None:
    from servelab.engines.images import image_tag

    assert image_tag("registry:5000/vllm/vllm-openai:v0.10.1") == "v0.10.1"  # a registry port is not a tag
    assert image_tag("vllm/vllm-openai@sha256:abc") == image_tag("vllm/vllm-openai") == ""
    assert vllm.image_version("vllm/vllm-openai:v0.10.1") == "0.10.1"
    assert vllm.image_version("vllm/vllm-openai:nightly") is None
    assert vllm.image_version("vllm/vllm-openai:latest") is None
    assert sglang.image_version("lmsysorg/sglang:v0.4.8.post1-rocm630-srt") == "0.4.8.post1"
    assert sglang.image_version("rocm/sgl-dev:v0.5.8.post1-rocm720-mi35x-20260218") == "0.5.8.post1"
    assert sglang.image_version("lmsysorg/sglang:dev") is None
    assert llamacpp.image_version("ghcr.io/ggml-org/llama.cpp:server-cuda-b5466") == "b5466"
    assert llamacpp.image_version("ghcr.io/ggml-org/llama.cpp:full-b4000") == "b4000"
    assert llamacpp.image_version("ghcr.io/ggml-org/llama.cpp:server-cuda13") is None
