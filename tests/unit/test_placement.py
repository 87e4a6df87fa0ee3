"""Group -> ``__consumer_offsets`` partition placement, checked against a JVM.

The literal vectors below were produced once by running
``tests/java/Placement.java`` on OpenJDK 17 (``String.hashCode()`` and Kafka's
``Utils.abs(h) % 50``). ``test_live_jvm_random_ids`` re-runs that program on a
fresh random sample whenever ``java`` and ``javac`` are available.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from broker.coordinator.placement import partition_for
from broker.javahash import java_abs, java_string_hash

INT_MIN = -(1 << 31)
INT_MAX = (1 << 31) - 1
JAVA_SRC = Path(__file__).resolve().parents[1] / "java" / "Placement.java"

# (group id, String.hashCode(), Utils.abs(hashCode) % 50) -- from a real JVM.
JVM_VECTORS: list[tuple[str, int, int]] = [
    ("", 0, 0),
    ("a", 97, 47),
    ("my-group", -1906497762, 12),
    ("test-group", 627841412, 12),
    ("console-consumer-12345", 158455506, 6),
    ("connect-cluster", 1440343063, 13),
    ("_confluent-controlcenter-7-5-0-1", 1248945565, 15),
    ("GROUP", 68091487, 37),
    ("group-0", 293427298, 48),
    ("group-1", 293427299, 49),
    ("zzzzzzzzzzzzzz", -1886561600, 0),
    # Latin-1 / accented
    ("café", 3045921, 21),
    ("Grüße-gruppe", 244589393, 43),
    ("ñandú", 225567348, 48),
    ("Ωmega", 868686747, 47),
    # CJK / Hangul
    ("消费者组", 871131088, 38),
    ("グループ-1", -582599942, 42),
    ("그룹", 1427969, 19),
    # outside the BMP: each character is a surrogate pair in UTF-16
    ("🚀", 1773027, 27),
    ("grupo-🚀", 675210695, 45),
    ("🎉party🎉", 203565254, 4),
    ("𝔘𝔫𝔦𝔠𝔬𝔡𝔢", 1267963173, 23),
    ("mix-é-消-🚀", -1823118531, 31),
    # embedded NUL
    ("a\x00b", 93315, 15),
    # long ids
    ("x" * 300, -1757771264, 14),
    ("group-" + "abcdefghij" * 20, 1639439602, 2),
    ("消" * 100, 445796864, 14),
    # hashCode() == Integer.MIN_VALUE: Utils.abs gives 0 -> partition 0
    ("polygenelubricants", INT_MIN, 0),
    ("alxexlnb", INT_MIN, 0),
    ("b0wb_5xi", INT_MIN, 0),
]


@pytest.mark.parametrize(("group_id", "hash_code", "partition"), JVM_VECTORS)
def test_jvm_vectors(group_id: str, hash_code: int, partition: int) -> None:
    assert java_string_hash(group_id) == hash_code
    assert partition_for(group_id) == partition
    assert partition_for(group_id, 50) == partition


def test_java_abs() -> None:
    assert java_abs(INT_MIN) == 0
    assert java_abs(INT_MIN + 1) == INT_MAX
    assert java_abs(-1) == 1
    assert java_abs(0) == 0
    assert java_abs(INT_MAX) == INT_MAX
    assert java_abs(-1906497762) == 1906497762


def test_abs_is_not_the_positive_mask() -> None:
    # Utils.toPositive (h & 0x7fffffff) would put these elsewhere.
    assert partition_for("my-group") == 12
    assert (java_string_hash("my-group") & 0x7FFFFFFF) % 50 == 36
    assert partition_for("zzzzzzzzzzzzzz") == 0
    assert (java_string_hash("zzzzzzzzzzzzzz") & 0x7FFFFFFF) % 50 == 48


def test_min_value_ids_map_to_partition_zero_for_any_count() -> None:
    for gid in ("polygenelubricants", "alxexlnb", "b0wb_5xi"):
        assert java_string_hash(gid) == INT_MIN
        for n in (1, 3, 7, 50, 51, 1000):
            assert partition_for(gid, n) == 0


def test_partition_count_is_respected() -> None:
    h = java_abs(java_string_hash("my-group"))
    for n in (1, 2, 3, 10, 49, 50, 51, 200):
        assert partition_for("my-group", n) == h % n
    with pytest.raises(ValueError):
        partition_for("my-group", 0)


def test_explicit_surrogates_hash_like_the_pair() -> None:
    # A Python string may hold the two surrogates as separate code points;
    # Java sees the same code units either way.
    assert java_string_hash("\ud83d\ude80") == java_string_hash("🚀") == 1773027
    # A lone surrogate is a single code unit.
    assert java_string_hash("\ud800") == 0xD800


def test_ascii_fast_path_agrees_with_generic_path() -> None:
    rng = random.Random(1234)
    for _ in range(300):
        s = "".join(chr(rng.randrange(0, 128)) for _ in range(rng.randrange(0, 150)))
        # Appending "é" forces the UTF-16 path; undo its contribution.
        generic = java_string_hash(s + "é")
        expected = ((generic - 0xE9) * pow(31, -1, 1 << 32)) & 0xFFFFFFFF
        assert java_string_hash(s) & 0xFFFFFFFF == expected


def _random_id(rng: random.Random) -> str:
    pools = [
        (0x20, 0x7F),  # printable ASCII
        (0xA0, 0x250),  # Latin-1 supplement / extended
        (0x370, 0x400),  # Greek
        (0x4E00, 0x9FFF),  # CJK
        (0xAC00, 0xD7A3),  # Hangul
        (0x1F300, 0x1FAFF),  # emoji (non-BMP)
        (0x10000, 0x10FFFF),  # anything past the BMP
    ]
    out = []
    for _ in range(rng.choice([0, 1, 2, 5, 8, 16, 40, 100, 255])):
        lo, hi = rng.choice(pools)
        cp = rng.randrange(lo, hi)
        if 0xD800 <= cp <= 0xDFFF:  # not encodable as UTF-8
            cp = 0x41
        out.append(chr(cp))
    return "".join(out)


def test_live_jvm_random_ids(tmp_path: Path) -> None:
    java, javac = shutil.which("java"), shutil.which("javac")
    if not java or not javac:
        pytest.skip("java/javac not on PATH; the literal JVM_VECTORS still cover placement")
    subprocess.run([javac, "-d", str(tmp_path), str(JAVA_SRC)], check=True, capture_output=True, timeout=60)

    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    ids = [_random_id(rng) for _ in range(200)] + ["polygenelubricants", "", "my-group"]
    stdin = "".join(s.encode("utf-8").hex() + "\n" for s in ids)
    proc = subprocess.run(
        [java, "-Xshare:auto", "-cp", str(tmp_path), "Placement", "50"],
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    lines = proc.stdout.splitlines()
    assert len(lines) == len(ids)
    for gid, line in zip(ids, lines, strict=True):
        h, a, p = map(int, line.split())
        got = (java_string_hash(gid), java_abs(java_string_hash(gid)), partition_for(gid))
        assert got == (h, a, p), f"seed={seed} id={gid!r}"
