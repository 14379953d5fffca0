"""The scheduler toolkit engines' schedulers are built from: the emulator's value types (`core`), continuous
batching (`continuous`) and its KV block pool (`blocks`). Pure; `predict` runs them, `engines/<e>/scheduler.py`
set them up; it imports nothing above it."""
