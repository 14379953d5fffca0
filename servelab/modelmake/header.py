"""Metadata every self-made GGUF carries: name, file type and the byte-level BPE tokenizer."""

from __future__ import annotations

import gguf

from servelab.modelmake.shapes import ModelShape
from servelab.modelmake.tensors import FILE_TYPES
from servelab.modelmake.tokenizer import CHAT_TEMPLATE, Vocabulary


def write_general(writer: gguf.GGUFWriter, name: str, shape: ModelShape) -> None:
    writer.add_name(name)
    writer.add_description("random-weight model made by servelab for tests and demos; its output is noise")
    writer.add_file_type(FILE_TYPES[shape.weight_type])
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)


def write_tokenizer(writer: gguf.GGUFWriter, vocab: Vocabulary) -> None:
    """GPT-2 style tokenizer keys as llama.cpp's gpt2 vocabulary loader reads them."""
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(list(vocab.tokens))
    writer.add_token_types(list(vocab.token_types))
    writer.add_token_merges(list(vocab.merges))
    end_of_text = vocab.token_id("<|endoftext|>")
    writer.add_bos_token_id(end_of_text)
    writer.add_eos_token_id(end_of_text)
    writer.add_eot_token_id(vocab.token_id("<|im_end|>"))
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)
