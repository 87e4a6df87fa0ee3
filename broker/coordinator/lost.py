"""What a coordinator says when recovery cut records from its partition.

Storage recovery truncates a log at its first invalid batch and moves the
dropped bytes aside (storage/quarantine.py), logging the offsets and bytes.
A coordinator that loads such a partition (group coordinator from
``__consumer_offsets``, transaction coordinator from ``__transaction_state``,
share coordinator from ``__share_group_state``) loads what precedes the cut,
then logs one WARNING per cut: every group (transactional id, share group)
mapped to that partition may have lost state; those whose records are in the
dropped bytes that still parse are named.
"""

from __future__ import annotations

from collections.abc import Callable

from protocol.records import iter_key_values, verify_crc
from storage.quarantine import framed_batches, readable_batches

from ..logs import get_logger

log = get_logger("coordinator.recovery")

# at most this many names in the WARNING (the count of all of them is there too)
MAX_NAMES = 200


def _names(batches, name_of, names: set[str]) -> int:
    bad = 0
    for hdr, batch in batches:
        if hdr.is_control:
            continue
        try:
            for key, _ in iter_key_values(batch):
                if key is not None and (name := name_of(key)):
                    names.add(name)
        except Exception:  # noqa: BLE001 - the bytes were cut for being damaged: decode what decodes
            bad += 1
    return bad


def dropped_names(paths, name_of: Callable[[bytes], str | None]) -> tuple[set[str], set[str], int]:
    """The names (``name_of`` of each record key) in the dropped files ``paths``: those of the
    batches that still parse (their CRC is right), those decoded from batches whose framing holds
    but whose CRC does not (the damaged batch itself, mostly: perhaps garbled), and how many
    batches could not be decoded."""
    names: set[str] = set()
    maybe: set[str] = set()
    bad = 0
    for path in paths:
        bad += _names(readable_batches(path), name_of, names)
        bad += _names([(h, b) for h, b in framed_batches(path) if not verify_crc(b)], name_of, maybe)
    return names, maybe - names, bad


def report_cuts(plog, topic: str, partition: int, what: str, name_of: Callable[[bytes], str | None]) -> None:
    """Log a WARNING for each cut recovery made in ``plog`` (once: they are forgotten after).
    ``what`` is the plural of what the coordinator keeps (``groups``, ``transactional_ids``)."""
    cuts, plog.recovery_truncations = getattr(plog, "recovery_truncations", []), []
    for cut in cuts:
        names, maybe, bad = dropped_names(cut.moved_to, name_of)
        listed = sorted(names)
        log.warning(
            "coordinator state may be lost: recovery cut records from its partition",
            topic=topic,
            partition=partition,
            first_offset_dropped=cut.first_offset,
            last_offset_dropped=cut.last_offset,
            bytes_dropped=cut.bytes_dropped,
            moved_to=[str(p) for p in cut.moved_to],
            **{what: listed[:MAX_NAMES], f"{what}_named": len(listed),
               f"{what}_in_damaged_batches": sorted(maybe)[:MAX_NAMES], "undecodable_batches": bad},
            note=(f"every one of the {what} mapped to {topic} partition {partition} may have lost state written at or "
                  f"after offset {cut.first_offset}; those in '{what}' had records in dropped batches that still parse, "
                  f"those in '{what}_in_damaged_batches' were decoded from a damaged batch and may be garbled "
                  "(docs/reliability.md)"),
        )


def _safe(decode: Callable[[bytes], object], attr: str) -> Callable[[bytes], str | None]:
    def name_of(key: bytes) -> str | None:
        try:
            return getattr(decode(key), attr, None)
        except Exception:  # noqa: BLE001 - a damaged key names nothing
            return None
    return name_of


def group_name(key: bytes) -> str | None:
    """The group of a ``__consumer_offsets`` record key."""
    from protocol.group_records import decode_key

    try:
        k = decode_key(key)
    except Exception:  # noqa: BLE001 - a damaged key names nothing
        return None
    return getattr(k, "group", None) or getattr(k, "group_id", None)


def transactional_id(key: bytes) -> str | None:
    """The transactional id of a ``__transaction_state`` record key."""
    from protocol.txn_records import decode_key

    return _safe(decode_key, "transactional_id")(key)


def share_group(key: bytes) -> str | None:
    """The share group of a ``__share_group_state`` record key."""
    from protocol.share_records import decode_key

    return _safe(decode_key, "group_id")(key)
