"""The trained byte-level BPE vocabulary as Hugging Face files: tokenizer.json (the `tokenizers` library's
format), tokenizer_config.json (ChatML template) and special_tokens_map.json.

The vocabulary is the one `tokenizer.train_vocabulary` learns for the GGUF models too. End of sequence is
``<|im_end|>`` (the chat turn's end); ``<|endoftext|>`` is the bos and pad token, and no bos is prepended,
as in the GGUF files.
"""

from __future__ import annotations

from typing import Any

from servelab.modelmake.tokenizer import CHAT_TEMPLATE, SPECIAL_TOKENS, Vocabulary

EOS_TOKEN = "<|im_end|>"
BOS_TOKEN = PAD_TOKEN = "<|endoftext|>"
_BYTE_LEVEL = {"add_prefix_space": False, "trim_offsets": True, "use_regex": True}


def special_ids(vocab: Vocabulary) -> dict[str, int]:
    """bos/eos/pad token ids, as config.json and generation_config.json name them."""
    return {
        "bos_token_id": vocab.token_id(BOS_TOKEN),
        "eos_token_id": vocab.token_id(EOS_TOKEN),
        "pad_token_id": vocab.token_id(PAD_TOKEN),
    }


def _added_token(token: str, token_id: int) -> dict[str, Any]:
    return {
        "id": token_id,
        "content": token,
        "single_word": False,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "special": True,
    }


def tokenizer_json(vocab: Vocabulary) -> dict[str, Any]:
    """A `tokenizers` BPE model with byte-level pre-tokenizer and decoder; the specials as added tokens."""
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [_added_token(t, vocab.token_id(t)) for t in SPECIAL_TOKENS],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", **_BYTE_LEVEL},
        "post_processor": {"type": "ByteLevel", **_BYTE_LEVEL, "trim_offsets": False},
        "decoder": {"type": "ByteLevel", **_BYTE_LEVEL},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": {token: i for i, token in enumerate(vocab.tokens)},
            "merges": [merge.split(" ") for merge in vocab.merges],
        },
    }


def tokenizer_config(vocab: Vocabulary, max_length: int) -> dict[str, Any]:
    return {
        "added_tokens_decoder": {
            str(vocab.token_id(t)): {k: v for k, v in _added_token(t, 0).items() if k != "id"}
            for t in SPECIAL_TOKENS
        },
        "add_bos_token": False,
        "add_eos_token": False,
        "bos_token": BOS_TOKEN,
        "eos_token": EOS_TOKEN,
        "pad_token": PAD_TOKEN,
        "unk_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "model_max_length": max_length,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }


def special_tokens_map() -> dict[str, str]:
    return {"bos_token": BOS_TOKEN, "eos_token": EOS_TOKEN, "pad_token": PAD_TOKEN}
