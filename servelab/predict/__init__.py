"""`servelab predict`: an engine emulator in virtual time, driven by the planner (docs/predict.md).

`roofline` prices a step at the machine's `AchievedRates`; `emulator` runs the discrete-event loop over an
engine's scheduler (`scheduling/`, `engines/<e>/scheduler.py`); `machine` builds the figures from a plan;
`virtual_ladder` is bench's load in virtual time; `run` stores it as a run marked predicted.
"""
