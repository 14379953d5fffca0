"""One package per engine. Everything engine-specific (launch flags, endpoints, effective-config reading,
log signatures, allocation rules) lives in that engine's package and nowhere else."""

ENGINES = ("llamacpp", "sglang", "vllm", "ollama", "openai")
