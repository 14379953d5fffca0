"""sglang engine knowledge."""
