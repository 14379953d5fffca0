"""The KV pool of a continuous-batching engine, in blocks (pages) of `block_tokens` tokens, with prefix caching.

vLLM V1 (block_size tokens a block) and sglang (a token pool: one token a page) both allocate a sequence's KV
from one pool and, with prefix caching, keep the blocks of finished prompts under a hash of everything before
them: a later prompt that starts the same way reuses them (vLLM `KVCacheManager.get_computed_blocks`; sglang's
radix tree). Blocks nobody holds stay cached until a new allocation evicts the least recently freed.
"""

from __future__ import annotations

from collections import OrderedDict

from servelab.predict.core import Sequence


class BlockPool:
    def __init__(self, total_blocks: int, block_tokens: int, *, prefix_caching: bool = True) -> None:
        self.total, self.block_tokens, self.prefix_caching = total_blocks, block_tokens, prefix_caching
        self.free = total_blocks  # never used, or used by a block without a hash
        self.refs: dict[int, int] = {}  # hash -> sequences holding it
        self.evictable: OrderedDict[int, None] = OrderedDict()  # cached, held by none; oldest first
        self.held: dict[
            int, list[int | None]
        ] = {}  # request id -> its blocks (a hash, or None: not shareable)
        self.state: dict[int, int] = {}  # request id -> blocks its recurrent state takes (never cached)
        self.published: dict[int, int] = {}  # request id -> leading blocks already published
        self._hashes: dict[int, list[int]] = {}

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_tokens)

    def available(self) -> int:
        return self.free + len(self.evictable)

    def hashes(self, seq: Sequence) -> list[int]:
        """The chained hash of each full block of the prompt (computed once per request)."""
        rid = seq.request.rid
        if rid not in self._hashes:
            prompt, size, out, h = seq.request.prompt, self.block_tokens, [], 0
            for k in range(len(prompt) // size):
                h = hash((h, prompt[k * size : (k + 1) * size]))
                out.append(h)
            self._hashes[rid] = out
        return self._hashes[rid]

    def cached_blocks(self, seq: Sequence) -> list[int]:
        """The leading prompt blocks already in the pool; at least one token is always left to compute."""
        if not self.prefix_caching:
            return []
        limit = (seq.tokens - 1) // self.block_tokens
        hits = []
        for h in self.hashes(seq)[:limit]:
            if h not in self.refs:
                break
            hits.append(h)
        return hits

    def admit(self, seq: Sequence, tokens: int, state_blocks: int = 0) -> int | None:
        """Give `seq` its cached prefix and blocks for `tokens` tokens (+ `state_blocks`); the cached tokens, or
        None (nothing taken) when the pool cannot."""
        hits = self.cached_blocks(seq)
        cached = len(hits) * self.block_tokens
        need = self.blocks_for(max(tokens, cached)) - len(hits) + state_blocks
        idle_hits = sum(1 for h in hits if self.refs[h] == 0)
        if need > self.available() - idle_hits:
            return None
        for h in hits:
            if self.refs[h] == 0:
                del self.evictable[h]
            self.refs[h] += 1
        self.held[seq.request.rid] = list(hits)
        self._take(seq, need - state_blocks)
        self._take_free(state_blocks)
        self.state[seq.request.rid] = state_blocks
        return cached

    def grow(self, seq: Sequence, tokens: int) -> bool:
        """Blocks for `tokens` tokens of a running `seq`; False (nothing taken) when the pool is out."""
        held = self.held[seq.request.rid]
        need = self.blocks_for(tokens) - len(held)
        if need <= 0:
            return True
        if need > self.available():
            return False
        self._take(seq, need)
        return True

    def _take(self, seq: Sequence, count: int) -> None:
        self._take_free(count)
        self.held.setdefault(seq.request.rid, []).extend([None] * count)

    def _take_free(self, count: int) -> None:
        """`count` blocks: never-used ones first, then the least recently freed cached ones (evicted)."""
        for _ in range(count):
            if self.free:
                self.free -= 1
            else:
                h, _ = self.evictable.popitem(last=False)
                del self.refs[h]

    def register(self, seq: Sequence) -> None:
        """Publish the full prompt blocks `seq` has computed, so later prompts can reuse them."""
        rid = seq.request.rid
        blocks = self.held.get(rid)
        if not self.prefix_caching or blocks is None:
            return
        full = min(seq.computed, seq.prompt_len, len(blocks) * self.block_tokens) // self.block_tokens
        hashes = self.hashes(seq)
        for k in range(self.published.get(rid, 0), full):
            h = hashes[k]
            if blocks[k] is None and h not in self.refs:
                blocks[k] = h
                self.refs[h] = 1
        self.published[rid] = max(full, self.published.get(rid, 0))

    def release(self, seq: Sequence) -> None:
        """`seq` finished or was preempted: its shareable blocks stay cached, the rest are free."""
        self.free += self.state.pop(seq.request.rid, 0)
        self.published.pop(seq.request.rid, None)
        for h in self.held.pop(seq.request.rid, []):
            if h is None:
                self.free += 1
                continue
            self.refs[h] -= 1
            if self.refs[h] == 0:
                self.evictable[h] = None
