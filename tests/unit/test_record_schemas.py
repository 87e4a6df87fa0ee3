"""The declarative record descriptions (protocol/group_records/_schema.py) and the codec they drive.

Golden bytes: what the hand-written codecs wrote before the descriptions replaced them
(captured from commit dec2aab), which the described records must reproduce exactly.
Round trips: every described record type at every version it defines, with every field
set to a value other than its default, decodes to what was encoded (less the fields the
version lacks); every truncation of such a record is refused as malformed.
"""

from __future__ import annotations

import uuid

import pytest

from protocol import group_records as gr
from protocol import share_records as sr
from protocol.group_records import RecordFormatError, classic, consumer, share
from protocol.group_records._schema import BYTES, INT8, INT16, INT32, INT64, NSTRING, STRING, UUID, Array, Struct

U1 = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
U2 = uuid.UUID("ffeeddcc-bbaa-9988-7766-554433221100")

# (name, key hex, value hex) as the code before the descriptions encoded the samples below
GOLDEN = [
    ('group_metadata_v0', '000200026731', '00000008636f6e73756d657200000007000572616e676500036d2d310000000200036d2d310003636c6900082f312e322e332e34000027100000000500017375620000000361736700036d2d320004636c693200082f352e362e372e3800001770000000000000000107'),
    ('group_metadata_v1', '000200026731', '00010008636f6e73756d657200000007000572616e676500036d2d310000000200036d2d310003636c6900082f312e322e332e3400007530000027100000000500017375620000000361736700036d2d320004636c693200082f352e362e372e380000afc800001770000000000000000107'),
    ('group_metadata_v2', '000200026731', '00020008636f6e73756d657200000007000572616e676500036d2d310000018bcfe5687b0000000200036d2d310003636c6900082f312e322e332e3400007530000027100000000500017375620000000361736700036d2d320004636c693200082f352e362e372e380000afc800001770000000000000000107'),
    ('group_metadata_v3', '000200026731', '00030008636f6e73756d657200000007000572616e676500036d2d310000018bcfe5687b0000000200036d2d31ffff0003636c6900082f312e322e332e3400007530000027100000000500017375620000000361736700036d2d320007696e73742dc3a90004636c693200082f352e362e372e380000afc800001770000000000000000107'),
    ('group_metadata_v4', '000200026731', '000409636f6e73756d6572000000070672616e6765046d2d310000018bcfe5687b03046d2d310004636c69092f312e322e332e3400007530000027100600017375620461736700046d2d3208696e73742dc3a905636c6932092f352e362e372e380000afc8000017700102070000'),
    ('group_metadata_empty_v3', '000200026731', '0003000000000000ffffffffffffffffffffffff00000000'),
    ('group_metadata_empty_v4', '000200026731', '000401000000000000ffffffffffffffff0100'),
    ('offset_commit_v0', '0001000267310002743100000003', '0000000000000000002a00046d6574610000018bcfe56800'),
    ('offset_commit_v1', '0001000267310002743100000003', '0001000000000000002a00046d6574610000018bcfe56800ffffffffffffffff'),
    ('offset_commit_v2', '0001000267310002743100000003', '0002000000000000002a00046d6574610000018bcfe56800'),
    ('offset_commit_v3', '0001000267310002743100000003', '0003000000000000002a0000000300046d6574610000018bcfe56800'),
    ('offset_commit_v4', '0001000267310002743100000003', '0004000000000000002a00000003056d6574610000018bcfe5680001001000112233445566778899aabbccddeeff'),
    ('cg_metadata', '0003000167', '00000000000500'),
    ('cg_metadata_hash', '0003000167', '000000000005010008fffffffff8a432eb'),
    ('cg_partition_metadata', '0004000167', '00000300112233445566778899aabbccddeeff037431000000020300000000030372310372320000000001010000ffeeddccbbaa9988776655443322110003743200000000010000'),
    ('cg_member', '000500016700016d', '00000269000263026803026102620572652e2a0000138808756e69666f726d00'),
    ('cg_member_classic', '000500016700016d', '000000057261636b026302680100ffffffff000100160100002710030672616e676503010200037272010000'),
    ('cg_target_metadata', '0006000167', '00000000000300'),
    ('cg_target_metadata_ts', '0006000167', '0000000000030100080000018bcfe56be7'),
    ('cg_target_member', '000700016700016d', '00000300112233445566778899aabbccddeeff0400000000000000010000000200ffeeddccbbaa99887766554433221100010000'),
    ('cg_current', '000800016700016d', '00000000000400000003010200112233445566778899aabbccddeeff03000000000000000501000903000000020000000402ffeeddccbbaa9988776655443322110002000000070000'),
    ('cg_regex', '00100001670003742e2a', '00000303743103743200000000000000090000018bcfe5680100'),
    ('sg_member', '000a0002736700016d', '000002720263026802027400'),
    ('sg_metadata', '000b00027367', '000000000002000000000000004d00'),
    ('sg_target_metadata', '000c00027367', '0000000000020100080000018bcfe56802'),
    ('sg_target_member', '000d0002736700016d', '00000200112233445566778899aabbccddeeff02000000010000'),
    ('sg_current', '000e0002736700016d', '000000000003000000020002ffeeddccbbaa998877665544332211000300000000000000010000'),
    ('sg_state', '000f00027367', '00000200112233445566778899aabbccddeeff0374310300000000000000010002ffeeddccbbaa9988776655443322110003743201000200112233445566778899aabbccddeeff05676f6e650000'),
    ('share_state_snapshot', '00000002736700112233445566778899aabbccddeeff00000003', '0000000000010000000200000003000000000000000a0000018bcfe568000000018bcfe5686403000000000000000a000000000000001300000100000000000000001400000000000000140400050000'),
    ('share_state_snapshot_dcc', '00000002736700112233445566778899aabbccddeeff00000003', '0000000000010000000200000003000000000000000a000000000000000100000000000000020101000400000007'),
    ('share_state_update', '000100027367ffeeddccbbaa9988776655443322110000000000', '00000000000400000005000000000000000b03000000000000000a000000000000001300000100000000000000001400000000000000140400050001000400000003'),
]

def samples():
    """(name, key, value, version or None)"""
    m1 = gr.MemberMetadata("m-1", None, "cli", "/1.2.3.4", 30000, 10000, b"\x00\x01sub", b"asg")
    m2 = gr.MemberMetadata("m-2", "inst-\u00e9", "cli2", "/5.6.7.8", 45000, 6000, b"", b"\x07")
    gm = gr.GroupMetadataValue("consumer", 7, "range", "m-1", 1700000000123, [m1, m2])
    gm_empty = gr.GroupMetadataValue("", 0, None, None, -1, [])
    out = []
    for v in range(5):
        out.append((f"group_metadata_v{v}", gr.GroupMetadataKey("g1"), gm, v))
    out.append(("group_metadata_empty_v3", gr.GroupMetadataKey("g1"), gm_empty, 3))
    out.append(("group_metadata_empty_v4", gr.GroupMetadataKey("g1"), gm_empty, 4))
    oc = gr.OffsetCommitValue(42, 3, "meta", 1700000000000, -1, U1)
    for v in range(5):
        out.append((f"offset_commit_v{v}", gr.OffsetCommitKey("g1", "t1", 3), oc, v))
    out.append(("cg_metadata", gr.ConsumerGroupMetadataKey("g"), gr.ConsumerGroupMetadataValue(5), None))
    out.append(("cg_metadata_hash", gr.ConsumerGroupMetadataKey("g"), gr.ConsumerGroupMetadataValue(5, -123456789), None))
    out.append(("cg_partition_metadata", gr.ConsumerGroupPartitionMetadataKey("g"), gr.ConsumerGroupPartitionMetadataValue([
        gr.TopicMetadata(U1, "t1", 2, [gr.PartitionMetadata(0, ["r1", "r2"]), gr.PartitionMetadata(1, [])]),
        gr.TopicMetadata(U2, "t2", 0, [])]), None))
    out.append(("cg_member", gr.ConsumerGroupMemberMetadataKey("g", "m"), gr.ConsumerGroupMemberMetadataValue(
        "i", None, "c", "h", ["a", "b"], "re.*", 5000, "uniform"), None))
    out.append(("cg_member_classic", gr.ConsumerGroupMemberMetadataKey("g", "m"), gr.ConsumerGroupMemberMetadataValue(
        None, "rack", "c", "h", [], None, -1, None,
        gr.ClassicMemberMetadata(10000, [gr.ClassicProtocol("range", b"\x01\x02"), gr.ClassicProtocol("rr", b"")])), None))
    out.append(("cg_target_metadata", gr.ConsumerGroupTargetAssignmentMetadataKey("g"), gr.ConsumerGroupTargetAssignmentMetadataValue(3), None))
    out.append(("cg_target_metadata_ts", gr.ConsumerGroupTargetAssignmentMetadataKey("g"), gr.ConsumerGroupTargetAssignmentMetadataValue(3, 1700000000999), None))
    out.append(("cg_target_member", gr.ConsumerGroupTargetAssignmentMemberKey("g", "m"), gr.ConsumerGroupTargetAssignmentMemberValue([
        gr.TopicPartitions(U1, [0, 1, 2]), gr.TopicPartitions(U2, [])]), None))
    out.append(("cg_current", gr.ConsumerGroupCurrentMemberAssignmentKey("g", "m"), gr.ConsumerGroupCurrentMemberAssignmentValue(
        4, 3, 1, [gr.TopicPartitions(U1, [0, 5], [2, 4])], [gr.TopicPartitions(U2, [7])]), None))
    out.append(("cg_regex", gr.ConsumerGroupRegularExpressionKey("g", "t.*"), gr.ConsumerGroupRegularExpressionValue(["t1", "t2"], 9, 1700000000001), None))
    out.append(("sg_member", share.ShareGroupMemberMetadataKey("sg", "m"), share.ShareGroupMemberMetadataValue("r", "c", "h", ["t"]), None))
    out.append(("sg_metadata", share.ShareGroupMetadataKey("sg"), share.ShareGroupMetadataValue(2, 77), None))
    out.append(("sg_target_metadata", share.ShareGroupTargetAssignmentMetadataKey("sg"), share.ShareGroupTargetAssignmentMetadataValue(2, 1700000000002), None))
    out.append(("sg_target_member", share.ShareGroupTargetAssignmentMemberKey("sg", "m"), share.ShareGroupTargetAssignmentMemberValue([gr.TopicPartitions(U1, [1])]), None))
    out.append(("sg_current", share.ShareGroupCurrentMemberAssignmentKey("sg", "m"), share.ShareGroupCurrentMemberAssignmentValue(3, 2, 0, [gr.TopicPartitions(U2, [0, 1])]), None))
    out.append(("sg_state", share.ShareGroupStatePartitionMetadataKey("sg"), share.ShareGroupStatePartitionMetadataValue(
        [share.TopicPartitionsInfo(U1, "t1", [0, 1])], [share.TopicPartitionsInfo(U2, "t2", [])], [share.TopicInfo(U1, "gone")]), None))
    return out

def share_samples():
    b = [sr.StateBatch(10, 19, 0, 1), sr.StateBatch(20, 20, 4, 5)]
    return [
        ("snapshot", sr.ShareKey(sr.SNAPSHOT, "sg", U1, 3), sr.ShareSnapshotValue(1, 2, 3, 10, 1700000000000, 1700000000100, b, -1)),
        ("snapshot_dcc", sr.ShareKey(sr.SNAPSHOT, "sg", U1, 3), sr.ShareSnapshotValue(1, 2, 3, 10, 1, 2, [], 7)),
        ("update", sr.ShareKey(sr.UPDATE, "sg", U2, 0), sr.ShareUpdateValue(4, 5, 11, b, 3)),
    ]

def _encoded():
    rows = []
    for name, k, v, ver in samples():
        val = gr.encode_value(v) if ver is None else gr.encode_value_version(v, ver)
        rows.append((name, gr.encode_key(k).hex(), val.hex()))
    for name, k, v in share_samples():
        rows.append(("share_state_" + name, sr.encode_key(k).hex(), sr.encode_value(v).hex()))
    return rows


def test_known_records_encode_to_the_bytes_the_hand_written_codecs_wrote():
    assert _encoded() == GOLDEN


def test_known_records_decode_from_those_bytes():
    for (name, key, value, _version), (gname, khex, vhex) in zip(samples(), GOLDEN[: len(samples())], strict=True):
        assert name == gname
        decoded_key = gr.decode_key(bytes.fromhex(khex))
        assert decoded_key == key
        decoded = gr.decode_value(decoded_key, bytes.fromhex(vhex))
        if not name.startswith(("group_metadata_v", "offset_commit_v")):  # older versions drop fields
            assert decoded == value, name
    for (name, key, value), (_, khex, vhex) in zip(share_samples(), GOLDEN[len(samples()) :], strict=True):
        assert sr.decode_key(bytes.fromhex(khex)) == key
        assert sr.decode_value(key.record_type, bytes.fromhex(vhex)) == value, name


# --------------------------------------------------------------------------
# every described record, every version

_PRIMITIVE_SAMPLES = {INT8: 3, INT16: -2, INT32: 70000, INT64: -(1 << 40), UUID: U2, STRING: "s\u00e9", NSTRING: "n", BYTES: b"\x00\xff"}


def _sample(t, depth: int = 0):
    if isinstance(t, Array):
        return [_sample(t.of, depth + 1), _sample(t.of, depth + 1)]
    if isinstance(t, Struct):
        values = {f.name: _sample(f.type, depth + 1) for f in (*t.fields, *t.tagged)}
        if "assignment_epochs" in values:  # one epoch per partition
            values["assignment_epochs"] = [5] * len(values["partitions"])
        return t.cls(**values)
    return _PRIMITIVE_SAMPLES[t]


def _as_read_at(s: Struct, obj, version: int, flexible: bool):
    """``obj`` as decoding it at ``version`` gives: fields the version lacks at their defaults."""
    values = {}
    for f in (*s.fields, *s.tagged):
        v = getattr(obj, f.name)
        if f.since > version or (f.tag is not None and not flexible):
            v = [] if isinstance(f.default, list) else f.default
        elif isinstance(f.type, Struct) and v is not None:
            v = _as_read_at(f.type, v, version, flexible)
        elif isinstance(f.type, Array) and isinstance(f.type.of, Struct):
            v = [_as_read_at(f.type.of, item, version, flexible) for item in v]
        values[f.name] = v
    return s.cls(**values)


def _described():
    gr.share  # noqa: B018 - loads the share-group records
    return [classic.GROUP_METADATA_RECORD, *consumer.RECORDS, *share.RECORDS]


@pytest.mark.parametrize(
    ("rec", "version"),
    [(rec, v) for rec in _described() for v in range(rec.versions[0], rec.versions[1] + 1)],
    ids=lambda x: x.value.name if hasattr(x, "value") else f"v{x}",
)
def test_every_described_record_round_trips_at_every_version(rec, version):
    key = _sample(rec.key)
    value = _sample(rec.value)
    kbytes = gr.encode_key(key)
    assert kbytes[:2] == rec.record_type.to_bytes(2, "big")
    assert gr.decode_key(kbytes) == key
    vbytes = gr.encode_value_version(value, version)
    assert vbytes[:2] == version.to_bytes(2, "big")
    assert gr.decode_value(key, vbytes) == _as_read_at(rec.value, value, version, version >= rec.flexible)
    # hostile input: every truncation is refused as malformed, never an IndexError or struct.error
    for cut in range(len(vbytes)):
        with pytest.raises(RecordFormatError):
            gr.decode_value(key, vbytes[:cut])
    with pytest.raises(RecordFormatError, match="version"):
        gr.decode_value(key, (rec.versions[1] + 1).to_bytes(2, "big") + vbytes[2:])
    with pytest.raises(ValueError, match="no version"):
        gr.encode_value_version(value, rec.versions[1] + 1)


@pytest.mark.parametrize("struct", [sr.SNAPSHOT_VALUE, sr.UPDATE_VALUE])
def test_share_state_values_round_trip_and_refuse_truncation(struct):
    value = _sample(struct)
    rtype = sr.SNAPSHOT if struct is sr.SNAPSHOT_VALUE else sr.UPDATE
    data = sr.encode_value(value)
    assert sr.decode_value(rtype, data) == value
    for cut in range(len(data)):
        with pytest.raises(sr.ShareRecordError):
            sr.decode_value(rtype, data[:cut])
    key = sr.ShareKey(rtype, "g", U1, 7)
    assert sr.decode_key(sr.encode_key(key)) == key


def test_a_tagged_fixed_size_field_of_the_wrong_size_is_refused():
    # ConsumerGroupMetadataValue v0: epoch 5, one tagged field (0, metadata hash) of 4 bytes, not 8
    with pytest.raises(RecordFormatError, match="not 8 bytes"):
        gr.decode_value(gr.ConsumerGroupMetadataKey("g"), bytes.fromhex("0000" "00000005" "01" "00" "04" "00000001"))


def test_an_array_count_beyond_the_record_is_refused():
    # ConsumerGroupRegularExpressionValue v0 claiming 2**20 topics
    with pytest.raises(RecordFormatError, match="exceeds"):
        gr.decode_value(gr.ConsumerGroupRegularExpressionKey("g", "r"), bytes.fromhex("0000" "81808040"))
