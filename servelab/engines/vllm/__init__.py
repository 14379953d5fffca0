"""vllm engine knowledge."""

DEFAULT_PORT = 8000
HEALTH_PATH = "/health"
IMAGE = "vllm/vllm-openai:latest"  # the container image `plan --emit compose` uses
