"""``Partition.append``: one way into a partition's log, checks chosen by who appends."""

from __future__ import annotations

import asyncio

import pytest

from broker.cluster import Cluster
from broker.partition import AppendError, AppendOrigin
from broker.metadata_load import load_cluster
from protocol.errors import ErrorCode
from protocol.records import Record, build_batch, split_batches
from storage.config import LogConfig


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, LogConfig())
    load_cluster(c)
    yield c
    c.close()


def batches(n: int = 2, **kw):
    return split_batches(build_batch([Record(offset=i, timestamp=1000 + i, key=b"k%d" % i, value=b"v") for i in range(n)], **kw))


def test_every_origin_wakes_the_fetches_parked_on_the_partition(cluster):
    part = cluster.create_topic("__internal-like", 1).partitions[0]

    async def run():
        woken = []
        for origin in (AppendOrigin.CLIENT, AppendOrigin.COORDINATOR, "internal"):
            waiter = asyncio.ensure_future(cluster.wait_for_data([part], 3600))
            await asyncio.sleep(0)  # parked
            part.append(batches(), origin)
            woken.append(await asyncio.wait_for(waiter, 30))  # the bound only keeps a regression from hanging
        return woken

    assert asyncio.run(run()) == [True, True, True]
    assert part.log.log_end_offset == 6


def test_client_batches_are_validated_and_broker_batches_trusted(cluster):
    part = cluster.create_topic("t", 1, {"max.message.bytes": "200"}).partitions[0]
    big = batches(20)
    with pytest.raises(AppendError) as refused:
        part.append(big, AppendOrigin.CLIENT)
    assert refused.value.code is ErrorCode.message_too_large and refused.value.log_start_offset == 0
    control = split_batches(build_batch([Record(offset=0, timestamp=1, key=b"\0\0\0\1", value=b"\0\0\0\0\0\0")], is_control=True))
    with pytest.raises(AppendError) as refused:
        part.append(control, AppendOrigin.CLIENT)
    assert refused.value.code is ErrorCode.invalid_record
    assert part.log.log_end_offset == 0
    # what the broker built itself is not checked again (the log keeps its own size limit)
    assert part.append(control, AppendOrigin.COORDINATOR).base_offset == 0
    with pytest.raises(ValueError, match="unknown append origin"):
        part.append(batches(), "clinet")  # a typo is refused, never trusted


def test_idempotent_client_batches_duplicates_and_sequence_errors(cluster):
    part = cluster.create_topic("idem", 1).partitions[0]
    first = part.append(batches(3, producer_id=7, producer_epoch=0, base_sequence=0), AppendOrigin.CLIENT)
    assert (first.base_offset, first.duplicate) == (0, False)
    assert part.append(batches(2, producer_id=7, producer_epoch=0, base_sequence=3), AppendOrigin.CLIENT).base_offset == 3
    again = part.append(batches(3, producer_id=7, producer_epoch=0, base_sequence=0), AppendOrigin.CLIENT)
    assert (again.base_offset, again.log_append_time, again.duplicate) == (0, -1, True)
    assert part.log.log_end_offset == 5  # not written twice
    with pytest.raises(AppendError) as refused:
        part.append(batches(1, producer_id=7, producer_epoch=0, base_sequence=9), AppendOrigin.CLIENT)
    assert refused.value.code is ErrorCode.out_of_order_sequence_number


def test_a_compacted_topic_refuses_keyless_client_records_with_record_errors(cluster):
    part = cluster.create_topic("cmp", 1, {"cleanup.policy": "compact"}).partitions[0]
    keyless = split_batches(build_batch([Record(offset=i, timestamp=1, key=None, value=b"v") for i in range(2)]))
    with pytest.raises(AppendError) as refused:
        part.append(keyless, AppendOrigin.CLIENT)
    assert refused.value.code is ErrorCode.invalid_record
    assert [e["batch_index"] for e in refused.value.record_errors] == [0, 1]
    assert "topic partition cmp-0" in refused.value.record_errors[0]["batch_index_error_message"]
