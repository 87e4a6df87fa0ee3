"""Dispatch: a part of ``KafkaConnection`` (a mixin) that runs a request's handler and
encodes its answer: the plain path, the hooked one (fault injection, metrics), unsupported
versions, a disk failure under a write (KAFKA_STORAGE_ERROR), a handler's failure, and the
answers given outside the request task (before SASL authentication)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine

from protocol.codec import build, drop_unknown, response_class
from protocol.connection import Request, ServerConnection, UnsupportedVersion
from protocol.errors import ErrorCode
from protocol.fast import ENCODERS as FAST_ENCODERS, Partial

from ..handlers import HANDLERS, RequestContext
from .common import _answer_size, _ConnectionLog


async def handle(broker, ctx, event: Request):
    """The handler's answer. On the active node of a cluster, a request that changed the
    cluster's metadata (topics, configs: anything ``Cluster`` saved and published) is answered
    only once every live node has applied the change, so the client sees it at once on any
    node (``broker.multinode.node.Node.propagated``); requests forwarded from other nodes
    (``broker/multinode/forwarding.py``) pass here too."""
    barrier = broker.metadata_barrier
    if barrier is None:
        return await HANDLERS[event.api_key].handle(ctx, event.body)
    before = barrier.published
    body = await HANDLERS[event.api_key].handle(ctx, event.body)
    if barrier.published != before:
        await barrier.propagated()
    return body


class Dispatch:
    """Running handlers and encoding answers (a mixin of KafkaConnection)."""

    __slots__ = ()

    def answer_now(self, event: Request) -> bytes | None:
        """Answer ``event`` here and now, outside the request task (ApiVersions before SASL
        authentication); None if its handler failed (the connection is then closed)."""
        if self.ctx is None:
            self.ctx = RequestContext(self.broker, self, _ConnectionLog(self))
        self.ctx.request = event
        coro = HANDLERS[event.api_key].handle(self.ctx, event.body)
        try:
            coro.send(None)
        except StopIteration as stop:
            try:
                return self._encode(event, stop.value)
            except Exception as exc:  # noqa: BLE001 - an encoder bug: as a handler's
                self._handler_failed(event, exc)
                return None
        except Exception as exc:  # noqa: BLE001 - a handler bug must not take the broker down
            self._handler_failed(event, exc)
            return None
        coro.close()
        self._handler_failed(event, RuntimeError(f"{HANDLERS[event.api_key].NAME} waited while answered before authentication"))
        return None

    def answer_unsupported(self, event: UnsupportedVersion) -> bytes:
        if self.ctx is None:
            self.ctx = RequestContext(self.broker, self, _ConnectionLog(self))
        return self._unsupported(event)

    def answer_and_close(self, body) -> None:
        """Send ``body`` as the answer to the request being handled, then close (a failed SASL
        re-authentication); the handler then returns None. Earlier answers go first."""
        event = self.ctx.request
        self._send_held()
        if body is not None and not self.closing:
            self.transport.write(self._encode(event, body))
        self.close()


    async def _dispatch(self, event) -> bytes | list | None:
        if self.broker.hooked:
            return await self._dispatch_hooked(event)
        ctx = self.ctx
        if isinstance(event, UnsupportedVersion):
            return self._unsupported(event)
        assert isinstance(event, Request)
        ctx.request = event
        try:
            body = await self._handle(event)
            if body is None:  # e.g. Produce with acks=0
                return None
            return self._encode(event, body)
        except OSError as exc:  # the disk (full, failing) under a write no handler maps itself
            return self._storage_failed(event, exc)
        except Exception as exc:  # a handler bug must not take the broker down
            self._handler_failed(event, exc)
            return None

    def _handle(self, event: Request):
        return handle(self.broker, self.ctx, event)

    def _storage_failed(self, event: Request, exc: OSError) -> bytes | list | None:
        """A handler's write failed on the disk (ENOSPC, EIO): KAFKA_STORAGE_ERROR in every error
        code of the answer, as Kafka answers a KafkaStorageException; the broker and the
        connection go on (the handler changed nothing it did not undo: docs/reliability.md)."""
        from ..faults import NO_RESPONSE, error_response

        self.log.error("storage error", api=HANDLERS[event.api_key].NAME, error=str(exc), errno=exc.errno)
        try:
            body = error_response(event, ErrorCode.kafka_storage_error, str(exc))
            return None if body is NO_RESPONSE else self._encode(event, body)
        except Exception as inner:  # noqa: BLE001 - no answer of that shape: as any other failure
            self._handler_failed(event, inner)
            return None

    def _handler_failed(self, event: Request, exc: Exception) -> None:
        """A handler, or the encoding of its answer, raised: a broker bug. Log it, tell the
        broker's ``on_handler_error`` hook (tests fail on it), close only this connection."""
        handler = HANDLERS[event.api_key]
        self.log.error(
            "handler failed", api=handler.NAME, version=event.api_version, client_id=event.client_id, exc_info=exc
        )
        hook = self.broker.on_handler_error
        if hook is not None:
            hook(handler.NAME, event, exc)
        self.close()

    def _encode(self, event: Request, body) -> bytes | list:
        """The framed answer: ``bytes``, or a list of buffers to write in order (a fast
        encoder's answer holding record bytes it did not copy: see ``protocol/fast.py``)."""
        fast = FAST_ENCODERS.get((event.api_key, event.api_version))
        if fast is not None and type(body) is not Partial:
            return fast(event.api_version, event.correlation_id, body)
        cls = response_class(event.api_key, event.api_version)
        return ServerConnection.encode_response(event.api_key, event.api_version, event.correlation_id, build(cls, body))

    async def _dispatch_hooked(self, event) -> bytes | list | None:
        """``_dispatch`` with fault injection, recording and metrics (see broker/faults.py)."""
        broker = self.broker
        faults = broker.faults if broker.faults is not None and broker.faults.active else None
        metrics = broker.metrics
        t0 = time.perf_counter()
        if isinstance(event, UnsupportedVersion):
            out = self._unsupported(event)
            if metrics is not None:
                metrics.observe(self, event, None, ErrorCode.unsupported_version, time.perf_counter() - t0, len(out))
            return out
        self.ctx.request = event
        plan = faults.plan(self, event) if faults is not None else None
        body = None
        delay = 0.0
        standby = broker.standby
        if standby is not None and plan is None:  # a node of a cluster that does not serve the data now
            body = standby.answer(self.ctx, event)
            if body is standby.PASS:
                body = None
            elif isinstance(body, Coroutine):  # forwarded to the active node (broker/multinode/forwarding.py)
                body = await body
                if self.closing:
                    return None
            elif body is not None and not isinstance(body, dict):  # NO_RESPONSE (Produce with acks=0)
                return None
        if plan is not None:
            if plan.drop:
                self.log.info("fault injected: connection dropped", api=HANDLERS[event.api_key].NAME, client_id=event.client_id)
                faults.recorded(self, event, None, plan)
                self.close()
                return None
            if plan.hold is not None:
                await plan.hold()
                if self.closing:
                    return None
            delay = plan.delay
            body = plan.response
        if body is None:
            try:
                body = await self._handle(event)
            except OSError as exc:
                return self._storage_failed(event, exc)
            except Exception as exc:  # a handler bug must not take the broker down
                self._handler_failed(event, exc)
                return None
        else:  # a planned answer: faults are in use, so broker.faults is imported already
            from ..faults import NO_RESPONSE

            if body is NO_RESPONSE:
                body = None
        if delay:
            await asyncio.sleep(delay)
        try:
            out = None if body is None or self.closing else self._encode(event, body)
        except Exception as exc:
            self._handler_failed(event, exc)
            return None
        if faults is not None:
            faults.recorded(self, event, body, plan)
        if metrics is not None:
            metrics.observe(self, event, body, None, time.perf_counter() - t0, _answer_size(out) if out else 0)
        return out

    def _unsupported(self, event: UnsupportedVersion) -> bytes:
        handler = HANDLERS[event.api_key]
        lo, hi = handler.VERSIONS
        self.log.info(
            "unsupported version",
            api=handler.NAME,
            version=event.api_version,
            supported=f"{lo}-{hi}",
            client_id=event.client_id,
        )
        if hasattr(handler, "unsupported"):
            version, body = handler.unsupported(self.ctx, event)
        else:
            version = hi if event.api_version > hi else lo
            body = {"error_code": ErrorCode.unsupported_version}
        cls = response_class(event.api_key, version)
        body = drop_unknown(cls, body, {"error_code"})  # Produce, OffsetCommit... have no top-level error code
        return ServerConnection.encode_response(event.api_key, version, event.correlation_id, build(cls, body))
