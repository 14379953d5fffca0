"""sim --emulate's token ids of a request body: as many as the sim's tokenizer counts, shared words shared."""

from __future__ import annotations

import pytest

from servelab.predict.words import WordTokenizer
from servelab.sim.config import sim_prompt_tokens

BODIES = [
    ({"messages": [{"role": "user", "content": "a b c"}]}, True),
    (
        {
            "messages": [
                {"role": "system", "content": "x"},
                {"role": "user", "content": [{"type": "text", "text": "y z"}]},
            ]
        },
        True,
    ),
    ({"messages": ["not a message", {"content": None}]}, True),
    ({"prompt": "one two three four"}, False),
    ({"prompt": [5, 6, 7]}, False),
    ({"prompt": ["first prompt here", "second"]}, False),
    ({"prompt": [1, "odd"]}, False),
    ({}, False),
]


@pytest.mark.parametrize(("body", "chat"), BODIES)
def test_ids_count_what_the_sim_counts(body: dict, chat: bool) -> None:
    assert len(WordTokenizer().request_ids(body, chat)) == sim_prompt_tokens(body, chat)


def test_a_chat_body_gets_the_ids_predict_gives_the_same_prompt() -> None:
    from servelab.bench.workloads import Prompt

    words = WordTokenizer()
    messages = [{"role": "user", "content": "shared prefix then more"}]
    prompt = Prompt(index=0, messages=messages, output_tokens=4)
    assert words.request_ids({"messages": messages}, chat=True) == words.prompt_ids(prompt)
    other = words.request_ids({"messages": [{"role": "user", "content": "shared prefix else"}]}, chat=True)
    assert other[:6] == words.prompt_ids(prompt)[:6] and other[6] != words.prompt_ids(prompt)[6]
