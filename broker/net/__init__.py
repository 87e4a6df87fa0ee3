"""The broker's network side: listening, connections, reading, answering.

Modules, each owning one part:

- ``admission``: ``Admission``, a part of ``broker.server.Broker``: the
  connection limits, the broker-wide request pool (``queued.max.request.bytes``),
  the periodic sweep, the budget of waiting descriptors; ``listen_now``.
- ``connection``: ``KafkaConnection``, one per client: reading and framing,
  flow control and backpressure (``paused``), closing, the request task (``_run``).
- ``pipeline``: pipelined requests and coalesced answers (a mixin of the connection).
- ``dispatch``: running handlers and encoding answers (a mixin).
- ``sendfile``: sending Fetch answers from files (a mixin).
- ``sasl_gate``: the SASL gate before requests, TLS low-water tuning (a mixin).
- ``common``: the constants and small helpers they share.

Each connection is an ``asyncio.Protocol``. Bytes are fed to the sans-IO
``protocol.connection.ServerConnection``; the decoded requests are queued and
handled in order by a task of the connection's own, one at a time, which is
how Kafka treats a connection too (it mutes a channel until its response is
out); except that the requests of ``handlers.PIPELINED`` (commits and
heartbeats) start while earlier ones still wait for their append, and are
answered in order (broker/net/pipeline.py). The task exists only
while the connection is busy (and for a second after): an idle connection
costs its transport and a small object.

Memory is bounded on both sides of a connection:

- answers: the transport's write buffer has a high-water mark; above it the
  connection handles no further request and is not read from until the
  client has read its answers down to the low-water mark (``pause_writing``
  and ``resume_writing``). A client that never reads holds one answer plus
  the high-water mark, and its own requests: at most ``_MAX_QUEUED`` of them
  or ``socket.request.max.bytes`` of them, whichever comes first. An answer
  may be a list of buffers (a Fetch's records, as read from the segment, are
  not copied into it), written with ``transport.writelines``: the buffers
  it holds are that answer's bytes, plus at most the part of one batch per
  partition that was read and not sent, so the bound is the same. Large
  reads are not read at all on a plain TCP connection: they are
  ``FileRegion``s sent with ``sendfile`` (broker/net/sendfile.py), and
  while the socket is full the connection is paused the same way; what
  waits is the file's descriptor, not its bytes.
- requests, broker-wide: every connection counts the bytes it holds for
  requests (frames being received and requests queued or in flight); past
  ``queued.max.request.bytes`` in all (``pool_full``), no connection in the
  middle of a large frame (``LARGE_FRAME``, 64 KiB, or more) is read from,
  except one (the one furthest into its frame, rotated if it stalls) so that
  the broker can finish a request, until the total falls to three quarters
  of the limit. The exempt one stops at the limit plus one largest frame
  (``request_bytes_cap``). The others go on being read, so small requests
  (metadata, heartbeats, commits, fetches) are still answered while large
  frames wait; one that starts a large frame is held back after that read.
  Past ``request_bytes_cap`` plus a reserve for those small requests
  (``request_bytes_hard``) no connection at all is read from
  (``pool_capped``) until the total is half a reserve below it again.

One periodic sweep (not a timer per connection) closes connections that sent
no complete request for ``connections.max.idle.ms``, ends the tasks of
connections quiet for ``_LINGER``, closes paused connections whose client has
gone (a paused transport does not read, so it would not see the EOF: one
poll(2) asks the kernel), and after a burst returns freed memory to the
operating system (a full collection, then glibc's ``malloc_trim``).
``max.connections`` and ``max.connections.per.ip`` close new connections over
the limit at once.
"""
