"""The serving oracle's messages to and from the kernel's serving vocabulary (:mod:`stratasim.kernel.serving`),
each message checked as it is read: a malformed one raises :class:`BadField` naming its field, which the servicer
answers with status INVALID_ARGUMENT. Imports no gRPC.
"""

from __future__ import annotations

from stratasim.kernel.serving import IterationShape, KvMove
from stratasim.v1 import serving_pb2

__all__ = [
    "MAX_CHUNKS",
    "MAX_SHAPES",
    "MAX_TOKENS",
    "BadField",
    "moves_from_message",
    "moves_to_message",
    "shape_from_message",
    "shape_to_message",
]

MAX_TOKENS = 1 << 24
"""New tokens one priced iteration or expert part may run (far beyond any engine's token budget)."""
MAX_CHUNKS = 1024
"""Prompt chunks one iteration may batch (beyond any engine's sequences a batch: each is an attention to price)."""
MAX_SHAPES = 256
"""Shapes one call may price."""


class BadField(ValueError):
    """A request field out of bounds; ``str(err)`` names the field (``shapes[0].chunks[1].new_tokens: ...``)."""


def shape_to_message(shape: IterationShape) -> serving_pb2.IterationShape:
    """``shape`` on the wire."""
    return serving_pb2.IterationShape(
        chunks=[serving_pb2.PrefillChunk(new_tokens=new, context_end=end) for new, end in shape.chunks],
        decodes=shape.decodes,
        decode_context=shape.decode_context,
        samples=shape.samples,
        queries=shape.queries,
    )


def shape_from_message(message: serving_pb2.IterationShape, where: str, max_context: int) -> IterationShape:
    """The iteration shape ``message`` (at ``where``) stands for, its chunks sorted and ``queries`` 0 taken as 1;
    :class:`BadField` for a chunk of no tokens or past its context, a context beyond ``max_context`` tokens (the
    model's, rounded up as the caller allows), negative counts, more samples than sequences, an empty batch or one
    of more than :data:`MAX_TOKENS` new tokens or :data:`MAX_CHUNKS` chunks."""
    queries = message.queries or 1
    _at_least(queries, 1, f"{where}.queries")
    if len(message.chunks) > MAX_CHUNKS:
        raise BadField(f"{where}.chunks: {len(message.chunks):,} exceed this server's limit of {MAX_CHUNKS:,}")
    chunks = []
    for index, chunk in enumerate(message.chunks):
        at = f"{where}.chunks[{index}]"
        _at_least(chunk.new_tokens, 1, f"{at}.new_tokens")
        _at_least(chunk.context_end, chunk.new_tokens, f"{at}.context_end", "its new_tokens")
        _context(chunk.context_end, max_context, f"{at}.context_end")
        chunks.append((chunk.new_tokens, chunk.context_end))
    _at_least(message.decodes, 0, f"{where}.decodes")
    if message.decodes:
        _at_least(message.decode_context, queries, f"{where}.decode_context", "its queries")
        _context(message.decode_context, max_context, f"{where}.decode_context")
    _at_least(message.samples, 0, f"{where}.samples")
    if message.samples > message.decodes + len(chunks):
        raise BadField(
            f"{where}.samples: {message.samples} exceeds the sequences batched ({message.decodes} decodes and "
            f"{len(chunks)} chunks)"
        )
    shape = IterationShape(
        tuple(sorted(chunks)),
        message.decodes,
        message.decode_context if message.decodes else 0,
        message.samples,
        queries,
    )
    if not shape.tokens:
        raise BadField(f"{where}: an empty batch (no chunks, no decodes) takes no time to price")
    tokens(shape.tokens, where)
    return shape


def tokens(count: int, where: str) -> int:
    """``count`` new tokens at ``where``; :class:`BadField` when negative or beyond :data:`MAX_TOKENS`."""
    _at_least(count, 0, where)
    if count > MAX_TOKENS:
        raise BadField(f"{where}: {count:,} new tokens exceed this server's limit of {MAX_TOKENS:,}")
    return count


def moves_to_message(moves: tuple[KvMove, ...]) -> list[serving_pb2.KvMove]:
    """KV moves on the wire."""
    return [serving_pb2.KvMove(destination=m.destination, tokens=m.tokens, size_bytes=m.size) for m in moves]


def moves_from_message(request: serving_pb2.PriceKvMovesRequest, replicas: int) -> tuple[KvMove, ...]:
    """The KV moves of ``request`` among ``replicas`` replicas; :class:`BadField` for a replica that does not exist,
    negative sizes, or no move."""
    _replica(request.source, replicas, "source")
    if not request.moves:
        raise BadField("moves: expected at least one move")
    moves = []
    for index, move in enumerate(request.moves):
        _replica(move.destination, replicas, f"moves[{index}].destination")
        _at_least(move.tokens, 0, f"moves[{index}].tokens")
        _at_least(move.size_bytes, 0, f"moves[{index}].size_bytes")
        moves.append(KvMove(move.destination, move.tokens, move.size_bytes))
    return tuple(moves)


def _at_least(value: int, least: int, where: str, said: str = "") -> None:
    if value < least:
        raise BadField(f"{where}: expected at least {said or least}, got {value}")


def _context(value: int, most: int, where: str) -> None:
    if value > most:
        raise BadField(f"{where}: {value} tokens is beyond the model's context ({most} tokens)")


def _replica(value: int, replicas: int, where: str) -> None:
    if not 0 <= value < replicas:
        raise BadField(f"{where}: no replica {value}; the study's pools have replicas 0 to {replicas - 1}")
