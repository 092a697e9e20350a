"""One replica's iteration-level scheduler (Orca's continuous batching, vLLM's scheduler) over a paged KV cache.

A sequence is a request on this replica. It waits (FCFS) until admitted: admission needs a free place among
``max_batch`` running sequences and free KV blocks for its whole prompt (the admission control of vLLM, which
never admits a prompt it cannot hold), leaving ``watermark`` of the blocks free (vLLM's watermark). Then its prompt is prefilled — in chunks with ``chunked_prefill`` — and
the iteration that ends the prompt samples its first token; every later iteration decodes one token, appending
the previous one's key and value and taking a new block when the last is full. An iteration batches:

- with ``chunked_prefill`` (Sarathi-Serve): every running decode first, then the running prompts' next chunks,
  then newly admitted prompts, each chunk as large as the ``token_budget`` left allows;
- without it (vLLM v0): whole prompts alone while any can be admitted within the budget, else every decode; with
  ``prompt_padding`` the prompts count as their number times the longest (vLLM 0.2's padded batches, Vidur's
  ``vllm`` scheduler).

When a decode needs a block and none is free, the most recently admitted running sequence is preempted (as vLLM,
possibly the one asking) and gives its blocks back. With ``preemption: recompute`` it returns to the head of the
queue and will prefill its prompt and the tokens it generated again, keeping what it already generated. With
``preemption: swap`` (vLLM v0's ``PreemptionMode.SWAP``) its cached keys and values are copied to the replica's
host memory (:class:`HostSwap`) and it waits in a swapped queue, oldest first; while any is swapped no new prompt
is admitted, and when no sequence was preempted in an iteration, swapped sequences are copied back as blocks allow
and continue where they stopped in that same iteration (vLLM v0's ``_schedule_swapped``). Copies in either
direction happen before the iteration's model runs, adding ``block_ps`` per block to it (:attr:`Batch.swap_ps`: its
copies out, then in);
a victim the host memory cannot hold is recomputed instead (vLLM aborts the request). ``preemptions`` counts
both kinds, ``swap_outs`` the swapped ones.

With speculative decoding (:class:`Speculation`) a decode step runs ``k + 1`` tokens through the target and
yields the accepted proposals and one more, as drawn (at most the tokens the request has left); a decoding
sequence keeps blocks for its ``k`` lookahead tokens (no more than it will ever hold).

With ``prefix_caching`` (:mod:`~stratasim.workload_layer.serving.prefix_cache`) a prompt admitted shares its
leading cached blocks and prefills after them (the iteration still sees its whole context), a sequence's full
blocks are cached as its chunks end and, when it finishes or is preempted, those of everything it computed; a
preempted sequence recomputed may find its own blocks still cached. A swapped sequence lets go of its shared blocks
and copies its whole context out and back as its own. With KV tiers (:mod:`~stratasim.workload_layer.serving.kv_tiers`)
the copies of evicted blocks to a tier and of blocks found there back to the GPU are added to the iteration that
made them, as swaps are (:attr:`Batch.swap_out_ps`, :attr:`Batch.swap_in_ps`).

Disaggregated serving: a ``prefill`` replica hands each sequence off as its prompt ends and its first token is
sampled (``handed_off``), keeping its blocks until the KV cache has moved (:meth:`ReplicaScheduler.release`); a
``decode`` replica receives it (:meth:`ReplicaScheduler.receive`) decoding, its prompt's keys and values cached,
and admits it ahead of any prompt once blocks for them are free. A sequence preempted on a decode replica is
recomputed there.
"""

from __future__ import annotations

from collections import deque

from stratasim.workload_layer.serving.config import SchedulerConfig
from stratasim.workload_layer.serving.iteration import IterationShape, iteration_shape
from stratasim.workload_layer.serving.kv_cache import HostSwap, KvCache, blocks_for
from stratasim.workload_layer.serving.kv_tiers import KvTier, KvTiers
from stratasim.workload_layer.serving.prefix_cache import PrefixCache
from stratasim.workload_layer.serving.requests import Request
from stratasim.workload_layer.serving.sequences import Batch, Sequence
from stratasim.workload_layer.serving.speculative import Speculation

__all__ = ["ReplicaScheduler"]


class ReplicaScheduler:
    """The queue, the running sequences and the KV cache of one replica; see the module docstring."""

    def __init__(
        self,
        config: SchedulerConfig,
        kv_blocks: int,
        hands_off: bool = False,
        swap: HostSwap | None = None,
        speculation: Speculation | None = None,
        replica: int = 0,
        tiers: tuple[KvTier, ...] = (),
    ) -> None:
        self.config = config
        self.lookahead = 0 if speculation is None else speculation.tokens
        self._draw = None if speculation is None else speculation.sampler(replica)
        self.speculative_steps = 0
        self.speculative_tokens = 0
        self.prefix = (
            PrefixCache(kv_blocks, config.block_size, KvTiers(tiers) if tiers else None)
            if config.prefix_caching
            else None
        )
        self.cache = self.prefix or KvCache(kv_blocks, config.block_size)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.swapped: deque[Sequence] = deque()
        self.swap = swap if config.preemption == "swap" else None
        self.host_used = 0
        self.preemptions = 0
        self.swap_outs = 0
        self._batch = Batch()
        self.outstanding_tokens = 0
        self.hands_off = hands_off
        self.handed_off: list[Sequence] = []
        self.incoming_blocks = 0
        self.incoming_requests = 0
        self.watermark_blocks = int(config.watermark * kv_blocks)

    def expect(self, sequence: Sequence) -> None:
        """A prefilled ``sequence`` is on its way here (its KV cache moving): the router counts it already."""
        self.outstanding_tokens += sequence.request.output_tokens - sequence.generated
        self.incoming_blocks += blocks_for(sequence.cached, self.cache.block_size)
        self.incoming_requests += 1

    def receive(self, sequence: Sequence) -> None:
        """``sequence``'s KV cache arrived (after :meth:`expect`): it queues to decode here, holding no blocks yet."""
        self.incoming_blocks -= blocks_for(sequence.cached, self.cache.block_size)
        self.incoming_requests -= 1
        self.waiting.append(sequence)

    def release(self, sequence: Sequence) -> None:
        """``sequence``, handed off, has moved its KV cache away: its blocks here are free."""
        self._free(sequence, sequence.cached)

    def enqueue(self, request: Request) -> None:
        """A request routed here joins the queue."""
        sequence = Sequence(request, request.prompt_tokens)
        self.waiting.append(sequence)
        self.outstanding_tokens += sequence.remaining_tokens

    def kv_load(self) -> int:
        """KV blocks in use and those the queued sequences' prompts will take when admitted."""
        block_size = self.cache.block_size
        queued = sum(blocks_for(sequence.prefill_target, block_size) for sequence in self.waiting)
        return self.cache.used + queued + self.incoming_blocks + self.host_used

    @property
    def outstanding_requests(self) -> int:
        """Requests here not yet finished: queued, running, swapped out, or on their way (:meth:`expect`)."""
        return len(self.waiting) + len(self.running) + len(self.swapped) + self.incoming_requests

    def next_batch(self, now_ps: int) -> Batch:
        """The sequences the next iteration runs (empty when there is nothing to run), blocks taken."""
        self._batch = batch = Batch()
        self._admit_received()
        if self.config.chunked_prefill:
            self._chunked(batch, now_ps)
        else:
            self._whole(batch, now_ps)
        if self.prefix is not None and self.prefix.tiers is not None:
            out, back = self.prefix.copied()
            batch.swap_out_ps += out
            batch.swap_in_ps += back
        return batch

    def _whole(self, batch: Batch, now_ps: int) -> None:
        preempted = self.preemptions
        if not self.swapped:
            self._admit(batch, self.config.token_budget, now_ps, whole=True)
        if not batch:
            used = self._decodes(batch, len(self.running) * (1 + self.lookahead))
            if self.preemptions == preempted:
                self._swap_in(batch, self.config.token_budget - used)

    def shape(self, batch: Batch, bucket: int) -> IterationShape:
        """``batch`` as the pricer sees it, bucketed by ``bucket`` tokens."""
        chunks = [(tokens, sequence.prefilled + tokens) for sequence, tokens in batch.chunks]
        ending = sum(sequence.prefilled + tokens == sequence.prefill_target for sequence, tokens in batch.chunks)
        queries = 1 + self.lookahead
        contexts = [sequence.cached + queries for sequence in batch.decodes]
        return iteration_shape(chunks, contexts, len(batch.decodes) + ending, bucket, queries)

    def finish_iteration(self, batch: Batch, now_ps: int) -> list[Sequence]:
        """Advance every sequence ``batch`` ran to ``now_ps``, the end of its iteration; the sequences that
        finished (their blocks given back)."""
        done = []
        for sequence, tokens in batch.chunks:
            sequence.prefilled += tokens
            self.outstanding_tokens -= tokens
            if self.prefix is not None:
                self._register(sequence, sequence.prefilled)
            if sequence.decoding:  # the prompt is cached: this iteration sampled a token
                sequence.cached = sequence.prefill_target
                sequence.generated += 1
                self.outstanding_tokens -= 1
                if sequence.first_token_ps < 0:
                    sequence.first_token_ps = now_ps
                if sequence.generated == sequence.request.output_tokens:
                    done.append(self._finish(sequence, now_ps))
                elif self.hands_off:
                    self._hand_off(sequence)
        if self._draw is not None:
            done += self._speculated(batch.decodes, now_ps)
            return done
        self.outstanding_tokens -= len(batch.decodes)
        for sequence in batch.decodes:  # the hot loop of a long run: kept to the bare updates
            sequence.cached += 1
            sequence.generated += 1
            if sequence.generated == sequence.request.output_tokens:
                done.append(self._finish(sequence, now_ps))
        return done

    def _speculated(self, decodes: list[Sequence], now_ps: int) -> list[Sequence]:
        """Advance ``decodes`` by a speculative step each: the accepted proposals drawn and the target's token, at
        most what each has left; the sequences that finished."""
        assert self._draw is not None
        done = []
        for sequence, accepted in zip(decodes, self._draw(len(decodes)), strict=True):
            gained = min(accepted + 1, sequence.request.output_tokens - sequence.generated)
            sequence.cached += gained
            sequence.generated += gained
            self.outstanding_tokens -= gained
            self.speculative_tokens += gained
            if sequence.generated == sequence.request.output_tokens:
                done.append(self._finish(sequence, now_ps))
        self.speculative_steps += len(decodes)
        return done

    def _step_tokens(self, sequence: Sequence) -> int:
        """Tokens a decoding ``sequence`` needs cache room for in its next step: its context and new token, and
        its lookahead up to the tokens it has left."""
        left = sequence.request.output_tokens - sequence.generated - 1
        return sequence.cached + 1 + min(self.lookahead, max(left, 0))

    def _finish(self, sequence: Sequence, now_ps: int) -> Sequence:
        """``sequence`` produced its last token at ``now_ps``: its blocks go back, it leaves the running ones."""
        sequence.finish_ps = now_ps
        self._free(sequence, sequence.cached)
        self.running.remove(sequence)
        return sequence

    def _register(self, sequence: Sequence, computed: int) -> None:
        """With prefix caching, ``sequence``'s full blocks among its first ``computed`` tokens are cached."""
        assert self.prefix is not None
        last = computed // self.cache.block_size
        if last > sequence.keyed:
            self.prefix.register(sequence.request, sequence.keyed, last, sequence.shared)
            sequence.keyed = last

    def _free(self, sequence: Sequence, computed: int) -> None:
        """``sequence`` gives its blocks back, with prefix caching its full blocks among the first ``computed``
        tokens (those whose keys and values it computed or shared) left cached."""
        if self.prefix is None:
            self.cache.give_back(sequence.blocks)
        else:
            self._register(sequence, computed)
            self.prefix.release(sequence.shared, sequence.blocks - len(sequence.shared))
            sequence.shared, sequence.keyed = [], 0
        sequence.blocks = 0

    def _hand_off(self, sequence: Sequence) -> None:
        """A prefill replica's ``sequence`` has its first token: it leaves for a decode replica, its blocks held
        until its KV cache has moved (:meth:`release`)."""
        self.running.remove(sequence)
        self.outstanding_tokens -= sequence.request.output_tokens - sequence.generated
        self.handed_off.append(sequence)

    def _admit_received(self) -> None:
        """Admit the received (decoding) sequences at the head of the queue while places and blocks for their
        cached tokens are free: they decode in this iteration."""
        while self.waiting and len(self.running) < self.config.max_batch:
            sequence = self.waiting[0]
            if not sequence.decoding:
                return
            blocks = blocks_for(sequence.cached, self.cache.block_size)
            if not self.cache.take(blocks):
                return
            self.waiting.popleft()
            sequence.blocks = blocks
            self.running.append(sequence)

    def _chunked(self, batch: Batch, now_ps: int) -> None:
        budget = self.config.token_budget
        preempted = self.preemptions
        budget -= self._decodes(batch, budget)
        for sequence in self.running:
            if not budget:
                break
            if sequence.prefilled != sequence.prefill_target:  # prefilling
                tokens = min(sequence.prefill_target - sequence.prefilled, budget)
                batch.chunks.append((sequence, tokens))
                budget -= tokens
        if self.preemptions == preempted:
            budget = self._swap_in(batch, budget)
        if not self.swapped:
            self._admit(batch, budget, now_ps, whole=False)

    def _swap_in(self, batch: Batch, budget: int) -> int:
        """Copy swapped sequences back, oldest first, while places, blocks and ``budget`` allow, each joining
        ``batch`` where it stopped (a decode, or its prompt's next chunk); the budget left."""
        swap, block_size = self.swap, self.cache.block_size
        while self.swapped and budget > 0 and len(self.running) < self.config.max_batch:
            assert swap is not None
            sequence = self.swapped[0]
            tokens = self._step_tokens(sequence) if sequence.decoding else sequence.prefill_target
            blocks = blocks_for(tokens, block_size)
            if (sequence.decoding and budget < 1 + self.lookahead) or not self.cache.take(blocks):
                break
            self.swapped.popleft()
            self.host_used -= sequence.swapped_blocks
            batch.swap_in_ps += sequence.swapped_blocks * swap.block_ps
            sequence.swapped_blocks, sequence.blocks = 0, blocks
            self.running.append(sequence)
            if sequence.decoding:
                batch.decodes.append(sequence)
                budget -= 1 + self.lookahead
            else:
                tokens = min(sequence.prefill_target - sequence.prefilled, budget)
                batch.chunks.append((sequence, tokens))
                budget -= tokens
        return budget

    def _decodes(self, batch: Batch, budget: int) -> int:
        """Add running decodes to ``batch`` within ``budget`` tokens (each runs ``1 + lookahead``), in admission
        order, taking the blocks their new tokens need (preempting the latest admitted when none is free); the
        tokens they take."""
        running, decodes, block_size, lookahead = self.running, batch.decodes, self.cache.block_size, self.lookahead
        limit, count = budget // (1 + lookahead), len(decodes)
        # The hot loop of a long run. A preemption (in _grow) removes only sequences from this one on (the latest
        # admitted), which the list's iterator sees as the indexed loop would.
        for sequence in running:
            if count >= limit:
                break
            if sequence.prefilled == sequence.prefill_target:  # decoding
                tokens = self._step_tokens(sequence) if lookahead else sequence.cached + 1
                if tokens > sequence.blocks * block_size and not self._grow(sequence, tokens):
                    break  # it was preempted itself, and every sequence after it
                decodes.append(sequence)
                count += 1
        return count * (1 + lookahead)

    def _grow(self, sequence: Sequence, tokens: int) -> bool:
        """Blocks for ``tokens`` of ``sequence`` (its next step's), preempting from the last admitted until there
        are; False if ``sequence`` itself had to go."""
        needed = blocks_for(tokens, self.cache.block_size) - sequence.blocks
        while needed > 0 and not self.cache.take(needed):
            victim = self.running[-1]
            self._preempt(victim)
            if victim is sequence:
                return False
        sequence.blocks += max(needed, 0)
        return True

    def _preempt(self, sequence: Sequence) -> None:
        """``sequence`` gives its blocks back: swapped to host memory when it has room (module docstring), else
        recomputed, waiting at the head of the queue to prefill its prompt and generated tokens again."""
        self.running.remove(sequence)
        self._free(sequence, sequence.kv_tokens)
        sequence.preemptions += 1
        self.preemptions += 1
        moved = blocks_for(sequence.kv_tokens, self.cache.block_size)
        if self.swap is not None and self.host_used + moved <= self.swap.blocks:
            self.host_used += moved
            self._batch.swap_out_ps += moved * self.swap.block_ps
            sequence.swapped_blocks, sequence.blocks = moved, 0
            self.swap_outs += 1
            self.swapped.append(sequence)
            return
        before = sequence.remaining_tokens
        sequence.blocks = sequence.prefilled = sequence.cached = 0
        sequence.prefill_target = sequence.request.prompt_tokens + sequence.generated
        self.outstanding_tokens += sequence.remaining_tokens - before
        self.waiting.appendleft(sequence)

    def _padded_over(self, batch: Batch, sequence: Sequence) -> bool:
        """With ``prompt_padding``, whether ``sequence``'s prompt joining ``batch``'s would take the padded batch
        (its prompts times the longest) past the token budget."""
        if not self.config.prompt_padding:
            return False
        longest = max([chunk.prefill_target for chunk, _ in batch.chunks] + [sequence.prefill_target])
        return (len(batch.chunks) + 1) * longest > self.config.token_budget

    def _admit(self, batch: Batch, budget: int, now_ps: int, whole: bool) -> None:
        """Admit queued sequences in order while there is room among the running ones, blocks for their whole
        prompt and token budget (all of the prompt if ``whole``, else a first chunk)."""
        while self.waiting and budget > 0 and len(self.running) < self.config.max_batch:
            sequence = self.waiting[0]
            if sequence.decoding or (whole and self._padded_over(batch, sequence)):
                break  # a received sequence waiting for blocks, or a padded batch beyond the budget
            if not self._take_prompt(sequence, budget if whole else None):
                break  # a prompt beyond the budget, the free blocks or the watermark
            self.waiting.popleft()
            if sequence.scheduled_ps < 0:
                sequence.scheduled_ps = now_ps
            self.running.append(sequence)
            tokens = min(sequence.prefill_target - sequence.prefilled, budget)
            batch.chunks.append((sequence, tokens))
            budget -= tokens

    def _take_prompt(self, sequence: Sequence, budget: int | None) -> bool:
        """Take blocks for ``sequence``'s whole prefill if the cache has them beyond the admission watermark and,
        when ``budget`` is given, the tokens left to prefill fit it; with prefix caching its leading cached blocks
        are shared and it prefills after them. False, nothing taken, when it does not fit."""
        target, block_size = sequence.prefill_target, self.cache.block_size
        blocks = blocks_for(target, block_size)
        if self.prefix is None:
            over = budget is not None and target > budget
            if over or self.cache.free - blocks < self.watermark_blocks or not self.cache.take(blocks):
                return False
            sequence.blocks = blocks
            return True
        hits = self.prefix.match(sequence.request, target)
        if budget is not None and target - hits * block_size > budget:
            return False
        shared = self.prefix.claim(sequence.request, hits, blocks, self.watermark_blocks)
        if shared is None:
            return False
        sequence.blocks, sequence.shared, sequence.keyed = blocks, shared, hits
        sequence.prefilled = hits * block_size
        sequence.found += sequence.prefilled
        self.outstanding_tokens -= sequence.prefilled
        self.prefix.counts.looked_up += target
        self.prefix.counts.hit += sequence.prefilled
        return True
