"""ollama engine knowledge."""
