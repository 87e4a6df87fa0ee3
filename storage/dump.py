"""Print the record batches of a segment file, or of bytes recovery moved aside.

    python -m storage.dump <file> [--records] [--all]

One line per batch: its position in the file, offsets, record count, CRC
(``ok`` or ``BAD``), producer and attributes. ``<segment>.log`` files are read
from their start, batch after batch, up to the first batch that does not
parse; ``*.corrupt-*`` files (storage/quarantine.py), or any file with
``--all``, are searched for every batch whose CRC is right wherever it starts,
after the damaged one at their start (shown first, if its framing holds).
``--records`` adds each record's offset, timestamp, key and value (``repr``,
cut at 80 bytes). Nothing is written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from protocol.records import iter_records, scan_valid_prefix, verify_crc

from .quarantine import find_batches, framed_batches, is_quarantined


def _cut(b: bytes | None) -> str:
    if b is None:
        return "null"
    return repr(b[:80]) + ("..." if len(b) > 80 else "")


def _line(pos: int | str, hdr, batch: bytes) -> str:
    return (f"position={pos} base_offset={hdr.base_offset} last_offset={hdr.last_offset} count={hdr.records_count} "
            f"size={hdr.size} crc={'ok' if verify_crc(batch) else 'BAD'} producer_id={hdr.producer_id} "
            f"producer_epoch={hdr.producer_epoch} base_sequence={hdr.base_sequence} transactional={hdr.is_transactional} "
            f"control={hdr.is_control} compression={hdr.compression} max_timestamp={hdr.max_timestamp}")


def dump(path: Path, *, records: bool, search: bool, out=sys.stdout) -> int:
    """Print the batches of ``path``; returns how many were found."""
    data = path.read_bytes()
    if search:
        found = [(p, h) for p, h in find_batches(data)]
        head = framed_batches(path)[:1]
        if head and not verify_crc(head[0][1]) and not (found and found[0][0] == 0):
            found.insert(0, (0, head[0][0]))
    else:
        found, _ = scan_valid_prefix(data, verify_crc=False)
    end = 0
    for pos, hdr in found:
        batch = data[pos:pos + hdr.size]
        print(_line(pos, hdr, batch), file=out)
        end = max(end, pos + hdr.size)
        if records and verify_crc(batch):
            try:
                for r in iter_records(batch):
                    print(f"  offset={r.offset} timestamp={r.timestamp} key={_cut(r.key)} value={_cut(r.value)}", file=out)
            except Exception as exc:  # noqa: BLE001 - a damaged file: say so and go on
                print(f"  records do not decode: {exc}", file=out)
    print(f"{len(found)} batches; {len(data)} bytes in the file" + ("" if search else f", {len(data) - end} after the last batch"), file=out)
    return len(found)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m storage.dump", description="Print the record batches of a segment file.")
    p.add_argument("file", type=Path)
    p.add_argument("--records", action="store_true", help="print every record of the batches whose CRC is right")
    p.add_argument("--all", action="store_true", help="search the whole file for batches (the default for *.corrupt-* files)")
    args = p.parse_args(argv)
    try:
        dump(args.file, records=args.records, search=args.all or is_quarantined(args.file.name))
    except OSError as exc:
        print(f"storage.dump: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
