"""Generate ``protocol/kio_names.py``: the field names of every kio entity, over all versions.

``protocol.codec.build`` refuses a key that is a field of no version of the message it builds.
Finding those names by importing every version of the message cost a broker a burst of imports
(up to 13 modules of kio dataclasses per message) at its first answer of each API; the table
holds them instead. ``tests/unit/test_kio_names.py`` checks it against the installed kio, so a
kio upgrade that changes a schema fails the suite until the table is regenerated:

    python -m tests.kio_names_gen
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import fields, is_dataclass
from pathlib import Path

import kio
import kio.schema

TARGET = Path(__file__).resolve().parent.parent / "protocol" / "kio_names.py"


def _packages(package: str):
    module = importlib.import_module(package)
    return [info.name for info in pkgutil.iter_modules(module.__path__) if info.ispkg]


def collect() -> dict[str, tuple[str, ...]]:
    """``"<message>.<kind>.<Class>"`` to the sorted field names of that class in any version."""
    names: dict[str, set[str]] = {}
    for message in _packages("kio.schema"):
        for version in _packages(f"kio.schema.{message}"):
            if not re.fullmatch(r"v\d+", version):
                continue
            package = importlib.import_module(f"kio.schema.{message}.{version}")
            for info in pkgutil.iter_modules(package.__path__):
                module = importlib.import_module(f"{package.__name__}.{info.name}")
                for name, obj in vars(module).items():
                    if isinstance(obj, type) and is_dataclass(obj) and obj.__module__ == module.__name__:
                        names.setdefault(f"{message}.{info.name}.{name}", set()).update(f.name for f in fields(obj))
    return {key: tuple(sorted(value)) for key, value in sorted(names.items())}


def render(table: dict[str, tuple[str, ...]]) -> str:
    lines = [
        '"""The field names of every kio entity over all versions of its message. Generated; do not edit.',
        "",
        f"Made by ``python -m tests.kio_names_gen`` from kio {kio.__version__}; read by ``protocol.codec``.",
        '"""',
        "",
        f"KIO_VERSION = {kio.__version__!r}",
        "",
        "NAMES: dict[str, tuple[str, ...]] = {",
    ]
    lines += [f"    {key!r}: {value!r}," for key, value in table.items()]
    lines += ["}", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    TARGET.write_text(render(collect()))
    print(f"wrote {TARGET}")
