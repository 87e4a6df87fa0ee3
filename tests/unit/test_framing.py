"""FrameDecoder: memory follows the bytes received, never the size announced."""

from __future__ import annotations

import random
import struct
import sys

import pytest

from protocol.framing import LARGE_FRAME, FrameDecoder, FrameError, FrameTooLarge, encode_frame


def _held(dec: FrameDecoder) -> int:
    """Bytes the decoder's buffers occupy (allocations, not lengths)."""
    pieces = dec._pieces or []
    return sys.getsizeof(dec._buf) + sum(sys.getsizeof(p) for p in pieces)


@pytest.mark.parametrize("seed", range(5))
def test_any_split_of_a_stream_of_small_and_large_frames_gives_the_same_frames(seed):
    rnd = random.Random(seed)
    sizes = [0, 1, 7, LARGE_FRAME - 1, LARGE_FRAME, LARGE_FRAME + 1, 3 * LARGE_FRAME + 5, 100, 12]
    rnd.shuffle(sizes)
    payloads = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    stream = b"".join(encode_frame(p) for p in payloads)
    dec = FrameDecoder()
    out = []
    pos = 0
    while pos < len(stream):
        step = rnd.choice([1, 3, 4, 5, 100, LARGE_FRAME // 3, LARGE_FRAME * 2])
        out += dec.feed(stream[pos : pos + step])
        pos = min(pos + step, len(stream))
        assert dec.buffered == _pending(stream, pos)
    assert out == payloads
    assert dec.buffered == 0
    assert all(type(f) is bytes for f in out)


def _pending(stream: bytes, pos: int) -> int:
    """Bytes of ``stream[:pos]`` held for the frame not yet complete: its body so
    far once its size prefix is in (the prefix is not kept), else the prefix so far."""
    start = 0
    while start + 4 <= pos:
        (size,) = struct.unpack_from(">i", stream, start)
        if start + 4 + size > pos:
            return pos - start - 4
        start += 4 + size
    return pos - start


def test_an_announced_size_allocates_nothing_until_the_bytes_come():
    dec = FrameDecoder(max_frame_bytes=200 * 1024 * 1024)
    assert dec.feed(struct.pack(">i", 100 * 1024 * 1024) + b"x" * 10) == []
    assert dec.buffered == 10
    assert _held(dec) < 4096
    dec.feed(b"y" * (2 * LARGE_FRAME))
    assert dec.buffered == 10 + 2 * LARGE_FRAME
    assert _held(dec) < 3 * LARGE_FRAME


def test_a_trickled_large_frame_is_coalesced_not_kept_as_many_objects():
    size = 3 * LARGE_FRAME
    dec = FrameDecoder()
    dec.feed(struct.pack(">i", size))
    got = []
    for i in range(size):
        got += dec.feed(b"%c" % (i % 256))
        if dec._pieces is not None:
            assert len(dec._pieces) <= i // LARGE_FRAME + 1
    assert got == [bytes(i % 256 for i in range(size))]
    assert dec.buffered == 0


def test_buffers_are_released_once_a_large_frame_is_handed_out():
    dec = FrameDecoder()
    big = b"z" * (8 * LARGE_FRAME)
    frame = encode_frame(big)
    head, tail = frame[: len(frame) // 2], frame[len(frame) // 2 :]
    assert dec.feed(head) == []
    # the rest of the large frame, two small frames and part of a third in one read
    rest = tail + encode_frame(b"a") + encode_frame(b"bc") + b"\x00\x00"
    assert dec.feed(rest) == [big, b"a", b"bc"]
    assert dec.buffered == 2
    assert dec._pieces is None
    assert _held(dec) < 1024
    # the same with small frames only: a bytearray that grew is shrunk again
    dec = FrameDecoder()
    chunk = b"".join(encode_frame(b"q" * 1000) for _ in range(60))
    assert len(dec.feed(chunk + b"\x00")) == 60
    assert _held(dec) < 1024


@pytest.mark.parametrize("kind", [bytes, bytearray])  # reads are bytes; anything else takes the bytearray path
def test_in_large_frame_while_a_large_frame_is_partly_received(kind):
    """What a broker short of request memory holds back: a large frame in progress, not a small one."""
    dec = FrameDecoder()

    def feed(data: bytes) -> list:
        return dec.feed(kind(data))

    assert feed(struct.pack(">i", 100)[:2]) == []
    assert dec.in_frame and not dec.in_large_frame  # not even the size yet
    feed(struct.pack(">i", 100)[2:] + b"s" * 50)
    assert dec.in_frame and not dec.in_large_frame  # a small frame
    assert feed(b"s" * 50) == [b"s" * 100]
    assert not dec.in_large_frame
    feed(struct.pack(">i", LARGE_FRAME))
    assert dec.in_large_frame  # its size is enough: its bytes will come
    feed(b"L" * (LARGE_FRAME - 1))
    assert dec.in_large_frame
    assert feed(b"L") == [b"L" * LARGE_FRAME]
    assert not dec.in_frame and not dec.in_large_frame


def test_a_frame_over_the_limit_is_refused_before_any_of_it_is_buffered():
    dec = FrameDecoder(max_frame_bytes=1024)
    with pytest.raises(FrameTooLarge):
        dec.feed(struct.pack(">i", 1025))
    assert dec.buffered == 0


@pytest.mark.parametrize("split", [None, 3, 7, LARGE_FRAME // 2])
def test_the_frames_before_a_bad_size_come_with_the_error(split):
    """A bad size prefix (negative, or over the limit) after whole frames: the error carries
    the frames completed before it, in order, whatever pieces the bytes came in (a large frame
    gathered piece by piece included)."""
    good = [b"a" * 10, b"b" * (LARGE_FRAME + 5), b"c"]
    for bad in (struct.pack(">i", -1), struct.pack(">i", 1 << 30)):
        stream = b"".join(encode_frame(f) for f in good) + bad + b"zzzz"
        dec = FrameDecoder(1 << 20)
        got = []
        with pytest.raises(FrameError) as err:
            if split is None:
                got += dec.feed(stream)
            else:
                for i in range(0, len(stream), split):
                    got += dec.feed(stream[i : i + split])
        assert got + err.value.frames == good
