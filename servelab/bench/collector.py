"""Python's cyclic garbage collector, kept quiet while a client measures.

With the default thresholds (700, 10, 10) a streaming client runs a young collection every few hundred
surviving objects and, now and then, a full collection over the whole heap: py-spy showed ~13% of the
loop's time in ``gc_collect_main`` and single pauses of 13-16 ms at 250 streams, during which every
arriving event waits to be stamped. While a client is open, the heap that existed before it (imports,
the workload) is frozen out of collection (``gc.freeze``) and the thresholds are raised: young
collections every 10,000 surviving objects, full ones rarely and over the objects made since. Garbage
without cycles is still freed at once by reference counting; cycles are still collected, later.
"""

from __future__ import annotations

import gc

QUIET_THRESHOLDS = (10_000, 50, 20)


class QuietCollector:
    """``with QuietCollector():`` — the quiet policy inside, the previous thresholds restored after.

    Nested or overlapping uses (several clients at once) are safe: only the one that changed the
    thresholds restores them."""

    def __init__(self) -> None:
        self._saved: tuple[int, ...] | None = None

    def __enter__(self) -> QuietCollector:
        if gc.get_threshold() != QUIET_THRESHOLDS:
            self._saved = gc.get_threshold()
            gc.collect()  # what is garbage now is not frozen with the rest
            gc.set_threshold(*QUIET_THRESHOLDS)
        gc.freeze()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._saved is not None:
            gc.unfreeze()
            gc.set_threshold(*self._saved)
            self._saved = None
