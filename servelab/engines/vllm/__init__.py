"""vllm engine knowledge."""
