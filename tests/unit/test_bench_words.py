"""The prompts' filler words: `_words` draws in bulk exactly what one `random.choice` per word would."""

from __future__ import annotations

import random

import pytest

from servelab.bench.workloads import _WORDS, _words


@pytest.mark.parametrize(
    ("seed", "index", "count"), [(0, 0, 1), (0, 3, 17), (42, 7, 1000), (7933, 2, 100_000)]
)
def test_bulk_words_are_the_words_one_choice_at_a_time_gives(seed, index, count):
    rng = random.Random(seed * 1_000_003 + index)
    assert _words(seed, index, count) == [rng.choice(_WORDS) for _ in range(count)]


def test_the_bulk_draw_is_for_62_words():  # 6-bit picks with 62 and 63 drawn again, as Random._randbelow does
    assert len(_WORDS) == 62 and len(set(_WORDS)) == 62
