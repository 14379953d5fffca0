"""Python's cyclic garbage collector, kept quiet while a client measures.

With the default thresholds (700, 10, 10) a streaming client runs a young collection every few hundred
surviving objects and, now and then, a full collection over the whole heap: py-spy showed ~13% of the
loop's time in ``gc_collect_main``, and per-50-ms timing showed single pauses of 13-16 ms at 250 streams
(raised thresholds still left 2 ms young collections), during which every arriving event waits to be
stamped. The client's own path makes almost no reference cycles (measured: 240 cyclic objects over a
2,000-request `servelab bench` run with the collector off), and everything else is freed at once by
reference counting. So while a client is open, automatic collection is off and the heap found on entry
is frozen out of the next collection; on exit the previous state comes back and cycles are collected.
"""

from __future__ import annotations

import gc


class QuietCollector:
    """``with QuietCollector():`` — no automatic collection inside; the previous state restored after.

    Nested or overlapping uses (several clients at once) are safe: only the one that switched the
    collector off switches it back on."""

    def __init__(self) -> None:
        self._switched_off = False

    def __enter__(self) -> QuietCollector:
        if gc.isenabled():
            gc.collect()  # what is garbage now is not frozen with the rest
            gc.disable()
            gc.freeze()
            self._switched_off = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._switched_off:
            gc.unfreeze()
            gc.enable()
            self._switched_off = False
