"""The parts of broker/multinode/ that need no process: the view, the standby gate's answers,
the channel's frames, node configurations and standby producer ids."""

from __future__ import annotations

import asyncio
import base64
import socket
import struct
import uuid
from types import SimpleNamespace

import pytest

from broker.config import BrokerConfig
from broker.multinode import channel
from broker.multinode.controller import node_config
from broker.multinode.standby import PASS, Standby, StandbyIds
from broker.multinode.view import ClusterView
from protocol.codec import build, decode, encode, request_class, response_class
from protocol.connection import Request
from protocol.errors import ErrorCode


def _view(node_id=2, active=1, live=(1, 2, 3)) -> ClusterView:
    view = ClusterView(node_id)
    view.apply({
        "active": active, "epoch": 4, "cluster_id": "c",
        "nodes": {str(i): {"live": i in live, "advertised": {"PLAINTEXT": ["127.0.0.1", 9000 + i], "TLS": ["h", 9100 + i]}} for i in (1, 2, 3)},
        "topics": {"t": {"id": str(uuid.uuid4()), "partitions": 2, "configs": {}}},
    })
    return view


def test_the_view_names_live_nodes_on_the_clients_listener_and_the_leader():
    view = _view(live=(1, 2))
    own = ("me", 1)
    assert view.brokers("PLAINTEXT", own) == [(1, "127.0.0.1", 9001), (2, "me", 1)]
    assert view.brokers("TLS", own) == [(1, "h", 9101), (2, "me", 1)]
    assert view.live_ids() == [1, 2] and view.offline_ids() == [3] and view.replica_ids() == [1, 2, 3]
    assert view.leader() == 1 and not view.serving
    view.apply({**_image_of(view), "nodes": {"1": {"live": False, "advertised": {}}, "2": {"live": True, "advertised": {}}}})
    assert view.leader() == -1  # the active node is gone and no other is chosen yet


def _image_of(view: ClusterView) -> dict:
    return {"active": view.active, "epoch": view.epoch, "nodes": view.nodes, "topics": view.topics}


def _event(api_key: int, version: int, body: dict) -> Request:
    cls = request_class(api_key, version)
    obj, _ = decode(cls, encode(build(cls, body)), 0)
    return Request(api_key, version, 7, "c", obj, 0)


def _ctx():
    listener = SimpleNamespace(name="PLAINTEXT", advertised=("me", 9002))
    return SimpleNamespace(conn=SimpleNamespace(listener=listener), broker=SimpleNamespace(authorizer=None, advertised=("me", 9002)))


def _encodes(event: Request, body: dict) -> None:
    build(response_class(event.api_key, event.api_version), body)  # the answer is one the client can read


def test_a_standby_refuses_produce_with_the_leaders_address_where_the_version_has_it():
    gate = Standby(None, _view())
    produce = {"transactional_id": None, "acks": -1, "timeout": 1000, "topic_data": [{"name": "t", "partition_data": [{"index": 1, "records": None}]}]}
    new, old = _event(0, 11, produce), _event(0, 9, produce)
    body = gate.answer(_ctx(), new)
    part = body["responses"][0]["partition_responses"][0]
    assert (part["index"], part["error_code"], part["current_leader"]) == (1, ErrorCode.not_leader_or_follower, {"leader_id": 1, "leader_epoch": 4})  # the election's epoch
    assert body["node_endpoints"] == [{"node_id": 1, "host": "127.0.0.1", "port": 9001, "rack": None}]
    _encodes(new, body)
    body = gate.answer(_ctx(), old)
    assert "node_endpoints" not in body and "current_leader" not in body["responses"][0]["partition_responses"][0]
    _encodes(old, body)
    assert gate.answer(_ctx(), _event(0, 9, {**produce, "acks": 0})) is not None  # NO_RESPONSE: nothing is sent


def test_a_standby_refuses_fetch_with_hints_from_v12_and_endpoints_from_v16():
    gate = Standby(None, _view())
    fetch = {"replica_id": -1, "max_wait": 100, "min_bytes": 1, "max_bytes": 1000, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
             "topics": [{"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                                                      "log_start_offset": -1, "partition_max_bytes": 1000}]}], "forgotten_topics_data": [], "rack_id": ""}
    for version, endpoints in ((12, False), (16, True)):
        event = _event(1, version, fetch)
        body = gate.answer(_ctx(), event)
        part = body["responses"][0]["partitions"][0]
        assert part["error_code"] == ErrorCode.not_leader_or_follower and part["current_leader"]["leader_id"] == 1
        assert body["error_code"] == ErrorCode.none  # the top level stays 0, as on Kafka, or the Java consumer ignores the hints
        assert ("node_endpoints" in body) is endpoints
        _encodes(event, body)


def test_a_standby_sends_group_requests_to_the_coordinator_and_admin_requests_to_the_controller():
    gate = Standby(None, _view())
    heartbeat = _event(12, 4, {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None})
    assert gate.answer(_ctx(), heartbeat)["error_code"] == ErrorCode.not_coordinator
    loading = Standby(None, _view(node_id=1, active=1))  # made active, still loading the data directory
    assert loading.answer(_ctx(), heartbeat)["error_code"] == ErrorCode.coordinator_load_in_progress
    create = _event(19, 7, {"topics": [{"name": "u", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}], "timeout": 1, "validate_only": False})
    body = gate.answer(_ctx(), create)
    assert body["topics"][0]["error_code"] == ErrorCode.not_controller
    _encodes(create, body)
    listed = _event(16, 4, {"states_filter": []})
    assert gate.answer(_ctx(), listed) == {"throttle_time": 0, "error_code": ErrorCode.none, "groups": []}  # it coordinates nothing
    for key, version, body in ((18, 3, {"client_software_name": "x", "client_software_version": "1"}), (3, 12, {"topics": None, "allow_auto_topic_creation": True,
                                "include_topic_authorized_operations": False})):
        assert gate.answer(_ctx(), _event(key, version, body)) is PASS


def test_a_standby_gives_an_idempotent_producer_an_id_of_its_own_range():
    gate = Standby(None, _view())
    init = _event(22, 4, {"transactional_id": None, "transaction_timeout": 1000, "producer_id": -1, "producer_epoch": -1})
    a, b = gate.answer(_ctx(), init), gate.answer(_ctx(), init)
    assert a["error_code"] == b["error_code"] == ErrorCode.none and a["producer_id"] != b["producer_id"]
    transactional = _event(22, 4, {"transactional_id": "x", "transaction_timeout": 1000, "producer_id": -1, "producer_epoch": -1})
    assert gate.answer(_ctx(), transactional)["error_code"] == ErrorCode.not_coordinator


def test_standby_producer_ids_never_collide_across_nodes_and_grow():
    one, two = StandbyIds(1), StandbyIds(2)
    ids1 = [one.next() for _ in range(1000)]
    ids2 = [two.next() for _ in range(1000)]
    assert ids1 == sorted(ids1) and len(set(ids1)) == 1000
    assert not set(ids1) & set(ids2)
    assert min(ids1 + ids2) > 1 << 54 and max(ids1 + ids2) < 1 << 63  # above the active node's blocks, a positive int64


def test_node_configs_move_every_fixed_port_and_keep_ephemeral_ones():
    base = BrokerConfig(port=9092, advertised_port=19092, metrics_port=9404)
    third = node_config(base, 3)
    assert (third.node_id, third.port, third.advertised_port, third.metrics_port) == (3, 9094, 19094, 9406)
    named = BrokerConfig(listeners=["PLAINTEXT://127.0.0.1:9092", "INTERNAL://0.0.0.0:0"], advertised_listeners=["PLAINTEXT://h:29092"])
    second = node_config(named, 2)
    assert second.listeners == ["PLAINTEXT://127.0.0.1:9093", "INTERNAL://0.0.0.0:0"]
    assert second.advertised_listeners == ["PLAINTEXT://h:29093"]
    assert node_config(BrokerConfig(port=0), 2).port == 0


def test_the_channel_refuses_oversized_and_malformed_frames():
    async def run():
        a, b = socket.socketpair()
        left, right = await channel.Channel.open(a), await channel.Channel.open(b)
        left.send({"t": "hb", "n": 1})
        assert await right.recv() == {"t": "hb", "n": 1}
        left.writer.write(struct.pack(">I", channel.MAX_FRAME + 1))
        with pytest.raises(channel.ChannelClosed, match="over"):
            await right.recv()
        c, d = socket.socketpair()
        left, right = await channel.Channel.open(c), await channel.Channel.open(d)
        left.writer.write(struct.pack(">I", 4) + b"[1] ")
        with pytest.raises(channel.ChannelClosed, match="not a channel message"):
            await right.recv()
        left.close()
        with pytest.raises(channel.ChannelClosed):
            await right.recv()
        right.close()

    asyncio.run(run())
    with pytest.raises(ValueError):
        channel.encode({"t": "x", "pad": "x" * channel.MAX_FRAME})


def test_error_answers_to_apis_with_fast_encoders_are_encoded_whole():
    """The fuzzer found it on a standby node: a NOT_COORDINATOR answer to JoinGroup or
    ConsumerGroupHeartbeat (a ``Partial`` answer, as every fault-injected one) went to the
    fast encoder, which reads every field, and the connection was closed."""
    from broker.net.dispatch import Dispatch

    gate = Standby(None, _view())
    requests = [
        _event(11, v, {"group_id": "g", "session_timeout": 10000, "rebalance_timeout": 10000, "member_id": "", "group_instance_id": None,
                       "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}], "reason": None})
        for v in range(0, 10)
    ] + [
        _event(68, v, {"group_id": "g", "member_id": "m", "member_epoch": 0, "instance_id": None, "rack_id": None, "rebalance_timeout": 1000,
                       "subscribed_topic_names": ["t"], "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []})
        for v in (0, 1)
    ] + [_event(12, 4, {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None})]
    for event in requests:
        body = gate.answer(_ctx(), event)
        frame = Dispatch._encode(None, event, body)
        cls = response_class(event.api_key, event.api_version)
        header, pos = decode(cls.__header_schema__, frame[4:], 0)
        answer, _ = decode(cls, frame[4:], pos)
        assert header.correlation_id == 7 and answer.error_code in (ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress)


_CREATE = {"topics": [{"name": "u", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}], "timeout": 1, "validate_only": False}


def _forwarding_ctx():
    ctx = _ctx()
    ctx.principal = "User:alice"
    ctx.conn.peer = "10.0.0.9:5555"
    return ctx


class _Outbox:
    """A node's channel, as the forwarder sends on it: the messages, and a wait for the n-th."""

    def __init__(self) -> None:
        self.messages: list[dict] = []
        self.changed = asyncio.Event()

    def send(self, message: dict) -> None:
        self.messages.append(message)
        self.changed.set()

    async def sent(self, n: int) -> dict:
        while len(self.messages) < n:
            await self.changed.wait()
            self.changed.clear()
        return self.messages[n - 1]


def test_a_standby_forwards_admin_requests_and_relays_the_answer():
    from broker.multinode.forwarding import Forwarder

    async def main():
        outbox = _Outbox()
        gate = Standby(None, _view())
        gate.forwarder = Forwarder(outbox.send)
        event = _event(19, 7, _CREATE)
        pending = asyncio.ensure_future(gate.answer(_forwarding_ctx(), event))
        message = await outbox.sent(1)
        assert (message["t"], message["key"], message["ver"], message["principal"], message["peer"], message["listener"]) == \
            ("fwd", 19, 7, "User:alice", "10.0.0.9:5555", "PLAINTEXT")
        cls = response_class(19, 7)
        answer = build(cls, {"throttle_time": 0, "topics": [{"name": "u", "topic_id": uuid.uuid4(), "error_code": 0, "error_message": None,
                                                                "num_partitions": 1, "replication_factor": 1, "configs": []}]})
        gate.forwarder.answered({"t": "fwd-answer", "id": message["id"], "body": base64.b64encode(encode(answer)).decode()})
        body = await pending
        assert body["topics"][0]["name"] == "u" and body["topics"][0]["error_code"] == 0
        _encodes(event, body)
        assert gate.forwarder.pending == {}

    asyncio.run(main())


def test_a_forwarded_request_gets_not_controller_when_the_active_node_goes_or_it_is_too_large(monkeypatch):
    from broker.multinode import forwarding

    async def main():
        outbox = _Outbox()
        gate = Standby(None, _view())
        gate.forwarder = forwarding.Forwarder(outbox.send)
        event = _event(19, 7, _CREATE)
        pending = asyncio.ensure_future(gate.answer(_forwarding_ctx(), event))
        first = await outbox.sent(1)
        gate.forwarder.active_changed(1)  # the same active node: still waiting
        assert [answer.done() for _, answer in gate.forwarder.pending.values()] == [False]
        gate.forwarder.active_changed(3)  # another one: node 1 will not answer
        assert (await pending)["topics"][0]["error_code"] == ErrorCode.not_controller
        gate.forwarder.answered({"t": "fwd-answer", "id": first["id"]})  # a late answer is dropped
        # the controller has no active node to send it to: an answer without a body
        pending = asyncio.ensure_future(gate.answer(_forwarding_ctx(), event))
        second = await outbox.sent(2)
        gate.forwarder.answered({"t": "fwd-answer", "id": second["id"]})
        assert (await pending)["topics"][0]["error_code"] == ErrorCode.not_controller
        monkeypatch.setattr(forwarding, "FORWARD_ROOM", 10)
        assert (await gate.answer(_forwarding_ctx(), event))["topics"][0]["error_code"] == ErrorCode.not_controller
        assert len(outbox.messages) == 2  # not sent at all
        assert gate.forwarder.pending == {}
        # no active node live: not forwarded
        alone = Standby(None, _view(live=(2, 3)))
        alone.forwarder = forwarding.Forwarder(outbox.send)
        assert alone.answer(_forwarding_ctx(), event)["topics"][0]["error_code"] == ErrorCode.not_controller

    asyncio.run(main())


def test_the_active_node_refuses_what_it_must_not_run_from_a_forwarded_message():
    from broker.multinode.forwarding import handle_forwarded

    async def main():
        broker = SimpleNamespace(metadata_barrier=None)
        good = base64.b64encode(encode(build(request_class(19, 7), _CREATE))).decode()
        for message in (
            {"key": 0, "ver": 9, "body": good},  # Produce is not forwarded
            {"key": 19, "ver": 99, "body": good},  # no such version
            {"key": 19, "ver": "7", "body": good},
            {"key": 19, "ver": 7, "body": "%%%"},  # not base64
            {"key": 19, "ver": 7, "body": base64.b64encode(b"\xff\xff\xff\xff").decode()},  # not a request
            {"key": 19, "ver": 7},
        ):
            assert await handle_forwarded(broker, message) is None

    asyncio.run(main())


def test_a_forwarded_request_failing_on_the_disk_is_answered_kafka_storage_error(monkeypatch):
    """As on the client's own connection (broker/net/dispatch.py), not as a handler bug."""
    from broker.handlers import HANDLERS
    from broker.multinode.forwarding import handle_forwarded

    async def full(ctx, body):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(HANDLERS[19], "handle", full)
    message = {"key": 19, "ver": 7, "body": base64.b64encode(encode(build(request_class(19, 7), _CREATE))).decode(), "principal": "User:alice"}
    raw = asyncio.run(handle_forwarded(SimpleNamespace(metadata_barrier=None), message))
    answer, _ = decode(response_class(19, 7), raw)
    assert [(t.name, t.error_code) for t in answer.topics] == [("u", ErrorCode.kafka_storage_error)]


def _controller(tmp_path, nodes=3):
    from broker.multinode.controller import Controller

    return Controller(SimpleNamespace(data_dir=tmp_path, nodes=nodes), lock_fd=-1)


def test_only_the_active_node_may_ask_for_a_preferred_leader_election(tmp_path, monkeypatch):
    controller = _controller(tmp_path)
    moved = []
    done = asyncio.Event()

    async def move_leader(node_id):
        moved.append(node_id)
        done.set()

    monkeypatch.setattr(controller, "move_leader", move_leader)

    async def run():
        controller.active = 2
        for slot in controller.slots.values():
            slot.live = True
        controller.slots[3].live = False
        for sender, message in ((1, {"t": "move-leader", "id": 1}),  # a standby: ignored
                                (2, {"t": "move-leader", "id": "1"}), (2, {"t": "move-leader", "id": 9}),  # not a node
                                (2, {"t": "move-leader", "id": 2}),  # itself: nothing to move
                                (2, {"t": "move-leader", "id": 3}),  # down
                                (2, {"t": "move-leader"}),
                                (2, {"t": "move-leader", "id": 1})):
            controller._on(controller.slots[sender], message)
        await asyncio.wait_for(done.wait(), 10)  # the last one's task: any earlier one would have run before it

    asyncio.run(run())
    assert moved == [1]


def test_a_lost_cluster_json_counts_the_epochs_on_from_the_partitions(tmp_path):
    from storage.leader_epochs import LeaderEpochs

    for name, epoch in (("a-0", 3), ("b-1", 7)):
        (tmp_path / name).mkdir()
        LeaderEpochs(tmp_path / name, fsync=False).assign(epoch, 10)
    assert _controller(tmp_path).epoch == 7
    (tmp_path / "cluster.json").write_text('{"version": 1, "epoch": 9}')
    assert _controller(tmp_path).epoch == 9
    (tmp_path / "cluster.json").write_text('{"version": 1, "ep')  # damaged
    assert _controller(tmp_path).epoch == 7
