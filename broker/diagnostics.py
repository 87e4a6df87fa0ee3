"""What the broker is doing right now, for a person looking at a stall.

``kill -USR1 <pid>`` writes a snapshot to ``<data dir>/diagnostics-<time>.txt``
and logs its path: every connection (its peer, whether reading is paused and
why, the requests queued and the one being handled), the request-byte pool,
each coordinator shard (its state, the records waiting for the next append,
whether an append is scheduled) and the stack of every asyncio task.
"""

from __future__ import annotations

import asyncio
import io
import os
import time
import traceback

from .logs import get_logger

log = get_logger("diagnostics")


def _connection_lines(broker) -> list[str]:
    lines = [f"connections: {len(broker.connections)}  request_bytes={broker.request_bytes}  pool_full={broker.pool_full}"]
    for conn in sorted(broker.connections, key=lambda c: c.peer):
        ctx = conn.ctx
        current = getattr(ctx, "request", None) if ctx is not None else None
        doing = f"api={current.api_key} v{current.api_version} corr={current.correlation_id}" if current is not None else "-"
        task = conn.task
        lines.append(
            f"  {conn.peer} paused={conn.paused} closing={conn.closing} queued={len(conn.queue) if conn.queue else 0} "
            f"held={conn.held} task={'none' if task is None else ('done' if task.done() else 'running')} "
            f"waiting={conn.waiter is not None} last={doing} idle_s={time.monotonic() - conn.seen:.1f}"
        )
    return lines


def _shard_lines(broker) -> list[str]:
    lines = []
    for rt in getattr(broker.coordinator, "shards", []):
        busy = getattr(rt, "_pending", None)
        lines.append(
            f"  shard {rt.index}: state={rt.state} pending={len(busy) if busy is not None else '?'} "
            f"batch_future={'none' if rt._batch_future is None else ('done' if rt._batch_future.done() else 'waiting')} "
            f"flush_scheduled={rt._flush_handle is not None} groups={len(rt.shard.groups)}"
        )
    return ["coordinator shards:"] + lines


def snapshot(broker) -> str:
    out = io.StringIO()
    out.write(f"kafkalite diagnostics pid={os.getpid()} at {time.strftime('%Y-%m-%dT%H:%M:%S')}\n\n")
    for section in (_connection_lines, _shard_lines):
        try:
            out.write("\n".join(section(broker)) + "\n\n")
        except Exception as exc:  # noqa: BLE001 - a snapshot must never fail the broker
            out.write(f"({section.__name__} failed: {exc!r})\n\n")
    tasks = asyncio.all_tasks()
    out.write(f"tasks: {len(tasks)}\n")
    for task in tasks:
        out.write(f"--- {task.get_name()} {task.get_coro()!r}\n")
        stack = io.StringIO()
        task.print_stack(file=stack)
        out.write(stack.getvalue())
    return out.getvalue()


def dump(broker) -> None:
    """The SIGUSR1 handler: write the snapshot next to the data and log where."""
    try:
        path = os.path.join(broker.config.data_dir, f"diagnostics-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.txt")
        with open(path, "w") as f:
            f.write(snapshot(broker))
        log.warning("diagnostics written", path=path)
    except Exception:  # noqa: BLE001
        log.warning("diagnostics failed", error=traceback.format_exc())
