"""servelab: plan, launch, verify, diagnose, benchmark and report LLM serving on your own GPUs."""

__version__ = "0.1.0"
