"""``joiner``: queued PCM joined to the chunk just read, bounded, and only when the turn offers it."""

from __future__ import annotations

from ttsbridge.policy.chunks import joiner


class _Queued:
    def __init__(self, queued: bytes) -> None:
        self.queued = queued
        self.asked: list[int] = []

    def take_ready(self, max_bytes: int) -> bytes:
        self.asked.append(max_bytes)
        out, self.queued = self.queued[:max_bytes], self.queued[max_bytes:]
        return out


def test_joins_queued_pcm_up_to_the_bound() -> None:
    turn = _Queued(b"\x01" * 1000)
    out = joiner(turn, rate=1000, coalesce_s=0.2)(b"\x00" * 100)  # bound: 200 samples = 400 bytes
    assert out == b"\x00" * 100 + b"\x01" * 300
    assert turn.asked == [300]


def test_a_full_chunk_or_a_turn_without_take_ready_is_left_alone() -> None:
    turn = _Queued(b"\x01" * 10)
    assert joiner(turn, rate=1000, coalesce_s=0.2)(b"\x00" * 400) == b"\x00" * 400
    assert turn.asked == []
    assert joiner(object(), rate=1000, coalesce_s=0.2)(b"\x00" * 4) == b"\x00" * 4


def test_nothing_queued_returns_the_chunk() -> None:
    assert joiner(_Queued(b""), rate=1000, coalesce_s=0.2)(b"\x00" * 4) == b"\x00" * 4
