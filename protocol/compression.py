"""Record-batch compression codecs (Kafka attribute bits 0-2), backed by cramjam.

Codec ids follow the RecordBatch attributes field:
    0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd

Wire-format notes
-----------------
* snappy: the Java client/broker write the *xerial* block-stream framing
  (``\\x82SNAPPY\\x00`` + version i32 + compat i32, then ``[len i32][raw block]*``),
  librdkafka writes a bare raw snappy block.  ``decompress`` detects both (and
  also the official snappy "framing format" stream, just in case);
  ``compress`` writes xerial framing, which every client can read.
* lz4: Kafka uses the LZ4 *frame* format with independent blocks (the Java
  reader decompresses every block on its own, so linked blocks would break
  it once the payload exceeds one block).  cramjam's frame compressor emits
  linked blocks, so ``compress`` builds the frame itself around raw
  ``compress_block`` output.  ``decompress`` uses cramjam's frame decoder.
* gzip / zstd: standard streams / frames.

Decompression failures raise :class:`CorruptRecordError` (re-exported by
``protocol.records``); unknown codec ids raise :class:`ValueError`.
"""

from __future__ import annotations

import struct

__all__ = [
    "CorruptRecordError",
    "NONE",
    "GZIP",
    "SNAPPY",
    "LZ4",
    "ZSTD",
    "CODEC_NAMES",
    "compress",
    "decompress",
]


class CorruptRecordError(ValueError):
    """Malformed record data: bad CRC, bad magic, truncated, bad length, undecodable payload."""


NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

cramjam = None  # the cramjam package, imported by the first compressed batch (a start needs none)


def _load_cramjam() -> None:
    global cramjam
    import cramjam

# --------------------------------------------------------------------------- snappy (xerial)

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, min compatible version 1
_XERIAL_BLOCK = 32 * 1024  # uncompressed bytes per block (xerial/Java default)
_SNAPPY_FRAMED_MAGIC = b"\xff\x06\x00\x00sNaPpY"  # official snappy framing format stream
_I32 = struct.Struct(">i")


def _blocks(data, size: int, frame) -> list[bytes]:
    """``frame(chunk)`` (a list of parts) of each ``size``-byte chunk of ``data``, in order, flattened."""
    mv = memoryview(data)
    return [part for start in range(0, len(mv), size) for part in frame(mv[start:start + size])]


def _xerial_block(chunk) -> list[bytes]:
    block = bytes(cramjam.snappy.compress_raw(chunk))
    return [_I32.pack(len(block)), block]


def _snappy_compress_xerial(data) -> bytes:
    return b"".join([_XERIAL_HEADER, *_blocks(data, _XERIAL_BLOCK, _xerial_block)])


def _snappy_decompress(data) -> bytes:
    mv = memoryview(data)
    n = len(mv)
    if n >= 16 and mv[:8] == _XERIAL_MAGIC:
        # version / compat ints are ignored (some producers write them little-endian)
        out = []
        pos = 16
        unpack = _I32.unpack_from
        while pos < n:
            if n - pos < 4:
                raise CorruptRecordError("snappy: truncated xerial block length")
            (blen,) = unpack(mv, pos)
            pos += 4
            if blen < 0 or pos + blen > n:
                raise CorruptRecordError(f"snappy: xerial block length {blen} exceeds remaining {n - pos} bytes")
            out.append(bytes(cramjam.snappy.decompress_raw(mv[pos:pos + blen])))
            pos += blen
        return b"".join(out)
    if n >= 10 and mv[:10] == _SNAPPY_FRAMED_MAGIC:
        return bytes(cramjam.snappy.decompress(mv))
    return bytes(cramjam.snappy.decompress_raw(mv))


# --------------------------------------------------------------------------- lz4 (frame)

_M32 = 0xFFFFFFFF
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _xxh32_short(data: bytes, seed: int = 0) -> int:
    """xxHash32 for inputs shorter than 16 bytes (enough for an LZ4 frame descriptor)."""
    n = len(data)
    if n >= 16:
        raise ValueError("_xxh32_short only handles inputs < 16 bytes")
    h = (seed + _P5 + n) & _M32
    pos = 0
    while pos + 4 <= n:
        (k,) = struct.unpack_from("<I", data, pos)
        h = (_rotl32((h + k * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        h = (_rotl32((h + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_FLG = 0x60  # version 01, block independence, no block/content checksum, no content size
_LZ4_BD = 0x40  # max block size 64 KB (what the Java client uses)
_LZ4_BLOCK = 64 * 1024
_LZ4_FRAME_HEADER = _LZ4_MAGIC + bytes(
    [_LZ4_FLG, _LZ4_BD, (_xxh32_short(bytes([_LZ4_FLG, _LZ4_BD])) >> 8) & 0xFF]
)
_LZ4_END_MARK = b"\x00\x00\x00\x00"
_U32LE = struct.Struct("<I")


def _lz4_block(chunk) -> list[bytes]:
    block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
    if len(block) >= len(chunk):
        return [_U32LE.pack(len(chunk) | 0x80000000), bytes(chunk)]  # stored uncompressed
    return [_U32LE.pack(len(block)), block]


def _lz4_compress_frame(data) -> bytes:
    return b"".join([_LZ4_FRAME_HEADER, *_blocks(data, _LZ4_BLOCK, _lz4_block), _LZ4_END_MARK])


# --------------------------------------------------------------------------- public API


def compress(codec: int, data) -> bytes:
    """Compress ``data`` (bytes-like) with Kafka codec id ``codec``."""
    if codec == NONE:
        return bytes(data)
    if cramjam is None:
        _load_cramjam()
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        return _snappy_compress_xerial(data)
    if codec == LZ4:
        return _lz4_compress_frame(data)
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"unknown compression codec {codec}")


def _decompress_bounded(codec: int, data, limit: int) -> bytes:
    """Decompress into a buffer that grows by doubling up to ``limit``; never beyond it."""
    module = {GZIP: cramjam.gzip, LZ4: cramjam.lz4, ZSTD: cramjam.zstd}[codec]
    size = min(limit, max(64 * 1024, 8 * len(data)))
    while True:
        out = bytearray(size)
        try:
            n = module.decompress_into(data, out)
        except Exception as exc:  # cramjam.DecompressionError: corrupt, or the buffer was too small
            if "whole buffer" not in str(exc):
                raise CorruptRecordError(f"{CODEC_NAMES[codec]} decompression failed: {exc}") from exc
            if size >= limit:
                raise CorruptRecordError(f"{CODEC_NAMES[codec]} batch decompresses to more than {limit} bytes") from exc
            size = min(limit, size * 2)
            continue
        del out[n:]
        return bytes(out)


# what a client's batch may decompress to where the broker has to look inside it
# (compacted topics' key check): a few kilobytes of zstd can claim gigabytes
MAX_CLIENT_DECOMPRESSED_BYTES = 64 * 1024 * 1024


def decompress(codec: int, data, limit: int | None = None) -> bytes:
    """Decompress ``data`` (bytes-like) compressed with Kafka codec id ``codec``.

    With ``limit``, a payload that would decompress to more than ``limit`` bytes
    raises CorruptRecordError without ever holding more than ``limit`` bytes
    (client data: a decompression bomb). Without it (the broker's own logs), any size.
    Raises CorruptRecordError if the payload cannot be decoded, ValueError on unknown codec.
    """
    if codec == NONE:
        return bytes(data)
    if cramjam is None:
        _load_cramjam()
    if limit is not None and codec in (GZIP, LZ4, ZSTD):
        return _decompress_bounded(codec, data, limit)
    try:
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            return _snappy_decompress(data)
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except CorruptRecordError:
        raise
    except Exception as exc:  # cramjam.DecompressionError and friends
        raise CorruptRecordError(f"{CODEC_NAMES[codec]} decompression failed: {exc}") from exc
    raise ValueError(f"unknown compression codec {codec}")
