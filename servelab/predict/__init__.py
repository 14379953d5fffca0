"""`servelab predict`: an engine emulator in virtual time, driven by the planner (docs/predict.md).

`core` (the emulator's value types), `continuous` and `blocks` (continuous batching and its KV block pool)
are leaves that engine packages import for their schedulers (`engines/<e>/scheduler.py`); `roofline` prices a
step; `emulator` runs the discrete-event loop; `machine` builds the figures from a plan; `run` is the ladder.
"""
