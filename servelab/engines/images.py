"""Container image names as the engines tag them: the tag, and a release named at its start.

``vllm/vllm-openai:v0.10.1`` → tag ``v0.10.1``; ``lmsysorg/sglang:v0.4.8.post1-rocm630-srt`` → ``v0.4.8.post1-…``;
``ghcr.io/ggml-org/llama.cpp:server-cuda-b5466`` → ``server-cuda-b5466``. Each engine's cmdline.py reads its
release out of the tag (`image_version`), which `plan --cmd/--compose` plans with.
"""

from __future__ import annotations

import re

_LEADING_RELEASE = re.compile(r"v?(\d+\.\d+(?:\.\d+)*(?:\.?post\d+|rc\d+)?)(?=$|[-_+])", re.IGNORECASE)


def image_tag(image: str) -> str:
    """The tag of an image reference ('' when it has none: ``latest`` by default); a digest is not a tag."""
    name = image.strip().split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.partition(":")[2]


def leading_release(image: str) -> str | None:
    """The release an image's tag starts with (``v0.4.8.post1-rocm630-srt`` → ``0.4.8.post1``), else None."""
    found = _LEADING_RELEASE.match(image_tag(image))
    return found.group(1) if found else None
