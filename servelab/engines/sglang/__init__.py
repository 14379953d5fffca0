"""sglang engine knowledge."""

DEFAULT_PORT = 30000
HEALTH_PATH = "/health"
IMAGE = "lmsysorg/sglang:latest"  # the container image `plan --emit compose` uses
