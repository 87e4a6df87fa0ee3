"""CRC-32C (Castagnoli), the checksum of record batches: the ``crc32c`` package's function.

The package's ``__init__`` imports ``importlib.metadata`` (and through it the
``email`` package) only to set ``__version__``, which costs about as much as
the rest of the broker's start-up imports of the storage layer. The function
itself lives in the package's extension module, ``crc32c._crc32c``; this
loads that module alone, registered under its own name (so a later
``import crc32c`` reuses it), and falls back to the package if the extension
is not where a wheel puts it.
"""

from __future__ import annotations

import sys


def _load():
    mod = sys.modules.get("crc32c._crc32c")
    if mod is None:
        try:
            import importlib.machinery
            import importlib.util
            import os

            spec = importlib.util.find_spec("crc32c")  # finds the package without running its __init__
            for folder in (spec.submodule_search_locations or []) if spec is not None else []:
                for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                    path = os.path.join(folder, "_crc32c" + suffix)
                    if os.path.isfile(path):
                        ext = importlib.util.spec_from_file_location(
                            "crc32c._crc32c", path, loader=importlib.machinery.ExtensionFileLoader("crc32c._crc32c", path))
                        mod = importlib.util.module_from_spec(ext)
                        ext.loader.exec_module(mod)
                        sys.modules["crc32c._crc32c"] = mod
                        break
                if mod is not None:
                    break
        except (ImportError, OSError, AttributeError, ValueError):
            mod = None
    if mod is None:
        from crc32c import crc32c as fn

        return fn
    return mod.crc32c


crc32c = _load()
