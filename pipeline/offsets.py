"""``__consumer_offsets`` records, decoded in Spark with the project's own codec.

``decode_records`` is a vectorised (Arrow) pandas UDF over the raw ``key`` and
``value`` columns of a Kafka source DataFrame: each batch of records goes to
``protocol.group_records.decode_key`` / ``decode_value`` and comes back as one
struct per record. Offset commits and classic group metadata get their fields;
KIP-848 consumer-group records keep their record type and group; anything the
codec cannot parse is kept as ``kind = "malformed"`` with the error, rather
than failing the job (a reader of someone else's log should not crash on it).
"""

from __future__ import annotations

import pandas as pd
from pyspark.sql import functions as F
from pyspark.sql import types as T

DECODED = T.StructType([
    T.StructField("kind", T.StringType()),  # offset_commit | group_metadata | consumer_group | unknown | malformed
    T.StructField("record_type", T.IntegerType()),
    T.StructField("group", T.StringType()),
    T.StructField("topic", T.StringType()),
    T.StructField("partition", T.IntegerType()),
    T.StructField("tombstone", T.BooleanType()),
    T.StructField("committed_offset", T.LongType()),
    T.StructField("leader_epoch", T.IntegerType()),
    T.StructField("commit_metadata", T.StringType()),
    T.StructField("commit_timestamp_ms", T.LongType()),
    T.StructField("expire_timestamp_ms", T.LongType()),
    T.StructField("protocol_type", T.StringType()),
    T.StructField("generation", T.IntegerType()),
    T.StructField("protocol", T.StringType()),
    T.StructField("leader", T.StringType()),
    T.StructField("members", T.IntegerType()),
    T.StructField("error", T.StringType()),
])
_FIELDS = [f.name for f in DECODED.fields]


def decode_one(key: bytes | None, value: bytes | None) -> dict:
    """One ``__consumer_offsets`` record as a flat dict of the DECODED fields."""
    from protocol import group_records as gr

    out = dict.fromkeys(_FIELDS)
    if key is None:
        out.update(kind="malformed", error="record without a key")
        return out
    key = bytes(key)
    if len(key) >= 2:
        out["record_type"] = int.from_bytes(key[:2], "big", signed=True)
    try:
        k = gr.decode_key(key)
        out["tombstone"] = value is None
        if isinstance(k, gr.OffsetCommitKey):
            out.update(kind="offset_commit", group=k.group, topic=k.topic, partition=k.partition)
            v = gr.decode_value(k, None if value is None else bytes(value))
            if v is not None:
                out.update(
                    committed_offset=v.offset,
                    leader_epoch=v.leader_epoch,
                    commit_metadata=v.metadata,
                    commit_timestamp_ms=v.commit_timestamp,
                    expire_timestamp_ms=v.expire_timestamp,
                )
        elif isinstance(k, gr.GroupMetadataKey):
            out.update(kind="group_metadata", group=k.group)
            v = gr.decode_value(k, None if value is None else bytes(value))
            if v is not None:
                out.update(
                    protocol_type=v.protocol_type,
                    generation=v.generation,
                    protocol=v.protocol,
                    leader=v.leader,
                    members=len(v.members),
                )
        elif isinstance(k, gr.UnknownRecordType):
            out.update(kind="unknown")
        else:  # the KIP-848 consumer-group records: keep type and group only
            out.update(kind="consumer_group", group=getattr(k, "group_id", None))
            gr.decode_value(k, None if value is None else bytes(value))  # validates it
    except (gr.RecordFormatError, TypeError, ValueError) as e:
        out.update(kind="malformed", error=f"{type(e).__name__}: {e}")
    return out


def decode_frame(keys: pd.Series, values: pd.Series) -> pd.DataFrame:
    rows = [decode_one(k, v) for k, v in zip(keys, values, strict=True)]
    frame = pd.DataFrame(rows, columns=_FIELDS)
    for name, dtype in (("record_type", "Int32"), ("partition", "Int32"), ("committed_offset", "Int64"),
                        ("leader_epoch", "Int32"), ("commit_timestamp_ms", "Int64"), ("expire_timestamp_ms", "Int64"),
                        ("generation", "Int32"), ("members", "Int32"), ("tombstone", "boolean")):
        frame[name] = frame[name].astype(dtype)
    return frame


@F.pandas_udf(DECODED)
def decode_records(keys: pd.Series, values: pd.Series) -> pd.DataFrame:
    """pandas UDF: (key binary, value binary) -> DECODED struct."""
    return decode_frame(keys, values)
