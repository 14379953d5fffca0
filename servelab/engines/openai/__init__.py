"""Generic OpenAI-compatible endpoints (NInfer and any other server that speaks the OpenAI API)."""
