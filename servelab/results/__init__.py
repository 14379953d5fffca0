"""The value types of a measurement: a request's record (`records`), a level's key (`level_key`), statistics and
document (`stats`: `LevelStats`, `LevelSummary`, with the steady `Window` they are taken over), a run's own
documents (`run`: `RunMeta`, `TargetInfo`), a speculative-decoding observation (`observation`).
Written by bench and predict, stored by store, read by report, compare, export, calibrate and speculative; it
imports nothing above it."""
