"""The KV pool of a continuous-batching engine, in blocks (pages) of `block_tokens` tokens, with prefix caching.

vLLM V1 (block_size tokens a block) and sglang (a token pool: one token a page) both allocate a sequence's KV
from one pool and, with prefix caching, keep the blocks of finished prompts under a hash of everything before
them: a later prompt that starts the same way reuses them (vLLM `KVCacheManager.get_computed_blocks`; sglang's
radix tree). Blocks nobody holds stay cached until a new allocation evicts the least recently freed.
"""

from __future__ import annotations

import itertools
import operator
from collections import OrderedDict

from servelab.scheduling.core import Sequence


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
        out = self._hashes.get(rid)
        if out is None:
            prompt, size = seq.request.prompt, self.block_tokens
            blocks = (
                zip(prompt)
                if size == 1
                else (prompt[k : k + size] for k in range(0, len(prompt) - size + 1, size))
            )
            out, h = [], 0
            for block in blocks:  # zip(prompt) yields prompt[k : k + 1]: the same tuples, without the slicing
                h = hash((h, block))
                out.append(h)
            self._hashes[rid] = out
        return out

    def cached_blocks(self, seq: Sequence) -> list[int]:
        """The leading prompt blocks already in the pool; at least one token is always left to compute."""
        if not self.prefix_caching:
            return []
        limit = (seq.tokens - 1) // self.block_tokens
        return list(itertools.takewhile(self.refs.__contains__, itertools.islice(self.hashes(seq), limit)))

    def admit(self, seq: Sequence, tokens: int, state_blocks: int = 0) -> int | None:
        """Give `seq` its cached prefix and blocks for `tokens` tokens (+ `state_blocks`); the cached tokens, or
        None (nothing taken) when the pool cannot."""
        hits = self.cached_blocks(seq)
        cached = len(hits) * self.block_tokens
        need = self.blocks_for(max(tokens, cached)) - len(hits) + state_blocks
        refs, evictable = self.refs, self.evictable
        if need > self.available() - list(map(refs.__getitem__, hits)).count(0):
            return None
        for h in hits:
            n = refs[h]
            if not n:
                del evictable[h]
            refs[h] = n + 1
        rid = seq.request.rid
        self.held[rid] = list(hits)
        self.published[rid] = len(hits)  # held already: register starts after them
        self._take(seq, need - state_blocks)
        self._take_free(state_blocks)
        self.state[rid] = state_blocks
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
        fresh = min(self.free, count)
        self.free -= fresh
        evictable, refs = self.evictable, self.refs
        for _ in range(count - fresh):
            h, _ = evictable.popitem(last=False)
            del refs[h]

    def register(self, seq: Sequence, upto: int | None = None) -> None:
        """Publish the full prompt blocks `seq` has computed (or, with `upto`, will have computed by the end of
        the step being scheduled), so later prompts can reuse them."""
        rid = seq.request.rid
        blocks = self.held.get(rid)
        if not self.prefix_caching or blocks is None:
            return
        done = seq.computed if upto is None else upto
        full = min(done, seq.prompt_len, len(blocks) * self.block_tokens) // self.block_tokens
        start = self.published.get(rid, 0)
        if full <= start:
            return
        new = self.hashes(seq)[start:full]
        refs, fresh = self.refs, dict.fromkeys(new, 1)
        if len(fresh) == len(new) == blocks[start:full].count(None) and refs.keys().isdisjoint(fresh):
            blocks[start:full] = new  # the usual case: none of them held or cached yet, all published at once
            refs.update(fresh)
        else:
            for k, h in enumerate(new, start):
                if blocks[k] is None and h not in refs:
                    blocks[k] = h
                    refs[h] = 1
        self.published[rid] = full

    def release(self, seq: Sequence) -> None:
        """`seq` finished or was preempted: its shareable blocks stay cached, the rest are free."""
        rid = seq.request.rid
        self.free += self.state.pop(rid, 0)
        self.published.pop(rid, None)
        blocks = self.held.pop(rid, [])
        unshared = blocks.count(None)
        self.free += unshared
        if unshared == len(blocks):
            return
        refs, evictable = self.refs, self.evictable
        shared = [h for h in blocks if h is not None]
        if len(dict.fromkeys(shared)) == len(shared):  # in bulk: each hash's holders less one, in block order
            left = list(map(int.__sub__, map(refs.__getitem__, shared), itertools.repeat(1)))
            refs.update(zip(shared, left, strict=True))
            for h in itertools.compress(shared, map(operator.not_, left)):  # (OrderedDict.update is slower)
                evictable[h] = None
            return
        for h in shared:
            n = refs[h] - 1
            refs[h] = n
            if not n:
                evictable[h] = None
