"""llama.cpp (llama-server) knowledge: build, launch flags, endpoints, allocation rules, log lines."""

DEFAULT_PORT = 8080
HEALTH_PATH = "/health"
IMAGE = "ghcr.io/ggml-org/llama.cpp:server-cuda"  # the container image `plan --emit compose` uses
