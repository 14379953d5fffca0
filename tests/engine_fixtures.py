"""Fixtures that give tests a real llama-server and the project's own GGUF models (filled in by the engine work)."""
