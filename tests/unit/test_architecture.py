"""The layers of the code, checked on its import statements (docs/architecture.md, "Layers and allowed imports").

The graph is read with ``ast`` from the sources of protocol/, storage/, broker/ and
kafkalite/: every ``import`` and ``from ... import`` statement, at module level or
inside a function (an import put in a function to dodge a circle is still a
dependency). An import under ``if TYPE_CHECKING:`` is only for annotations: it
counts for the layer rules but not as part of a circle, since it never runs.

The rules:

- protocol/ imports nothing of storage/ or broker/;
- storage/ imports nothing of broker/ (protocol/ it may);
- a module of broker/handlers/ takes from broker/coordinator/ only its ``service``
  and ``errors`` modules (``KNOWN_HANDLER_COORDINATOR_IMPORTS``: today's others,
  being removed; no new one);
- a module of broker/handlers/ imports of the other handler modules only the
  shared ones (``SHARED_HANDLER_MODULES``), and the package itself;
- broker/coordinator_runtime/ (the one coordinator runtime) imports no coordinator
  (broker/coordinator/, broker/txn/, broker/share/): they plug their shards into it;
- no circle of imports among the modules of broker/, nor among those of storage/.

A failure names each offending import as ``file:line``.

The sizes (kafkalite issue 25), read with ``ast`` from broker/, protocol/ and storage/: no
module over ``MAX_MODULE_LINES`` lines, no function or method over ``MAX_FUNCTION_LINES``
(from its ``def`` to its last line), but those in ``KNOWN_LONG_MODULES`` /
``KNOWN_LONG_FUNCTIONS``, which only shrink. A failure names each as ``file:line``.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("protocol", "storage", "broker", "kafkalite")

HANDLERS = "broker.handlers"
COORDINATOR = "broker.coordinator"
COORDINATOR_RUNTIME = "broker.coordinator_runtime"
COORDINATORS = ("broker.coordinator", "broker.txn", "broker.share")  # the shards the runtime runs
# what a handler may import of the coordinator: the service (its one way in) and the error channel
ALLOWED_HANDLER_COORDINATOR_MODULES = frozenset({"broker.coordinator.service", "broker.coordinator.errors"})
# (handler module, coordinator module) imports beyond the service and errors: none is left. Never
# add one: a handler needing something of the coordinator gets it through the service.
KNOWN_HANDLER_COORDINATOR_IMPORTS: frozenset = frozenset()  # none left: handlers reach the coordinator through service and errors only
# the handler modules written to be shared by several handlers (each one's users are named in it)
SHARED_HANDLER_MODULES = frozenset({
    "broker.handlers._acls",  # CreateAcls, DeleteAcls, DescribeAcls
    "broker.handlers._assignments",  # CreateTopics, CreatePartitions
    "broker.handlers._config_entries",  # DescribeConfigs, CreateTopics
    "broker.handlers._configs",  # AlterConfigs, IncrementalAlterConfigs, DescribeConfigs
    "broker.handlers._groups",  # the group handlers
    "broker.handlers._share",  # ShareFetch, ShareAcknowledge
    "broker.handlers._share_offsets",  # Describe/Alter/DeleteShareGroupOffsets
    "broker.handlers._share_state",  # the share-state RPCs
    "broker.handlers._txn",  # the transaction handlers
})
# imports of one API's module by another's: none left, and never add one (what two handlers share goes in a shared module)
KNOWN_HANDLER_TO_HANDLER_IMPORTS: frozenset = frozenset()

SIZED_PACKAGES = ("broker", "protocol", "storage")
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 100
# modules over MAX_MODULE_LINES there today (path from the root -> why); delete an entry once it is under, never add one
KNOWN_LONG_MODULES: dict[str, str] = {}
# ("path", "function's qualified name") over MAX_FUNCTION_LINES there today: none
KNOWN_LONG_FUNCTIONS: frozenset = frozenset()


# ----------------------------------------------------------------------------- the graph
@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module (one of ours)
    path: Path
    line: int
    type_checking: bool  # under ``if TYPE_CHECKING:``

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.source} imports {self.target}"


def _modules() -> dict[str, tuple[Path, bool]]:
    """module name -> (file, is a package)"""
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            package = parts[-1] == "__init__"
            if package:
                parts.pop()
            out[".".join(parts)] = (path, package)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST) -> Iterable[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement of the tree, at any depth, and whether it is under ``if TYPE_CHECKING:``."""
    todo: list[tuple[ast.AST, bool]] = [(tree, False)]
    while todo:
        node, typing_only = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, typing_only
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            todo.extend((child, True) for child in node.body)
            todo.extend((child, typing_only) for child in node.orelse)
            continue
        todo.extend((child, typing_only) for child in ast.iter_child_nodes(node))


def _resolve(name: str, modules: Mapping) -> str | None:
    """The module of ours that ``name`` is or is in (longest prefix), or None (the stdlib, a dependency)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str, path: Path, package: bool, modules: Mapping) -> list[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    here = module if package else module.rpartition(".")[0]
    out = []
    for node, typing_only in _import_nodes(tree):
        targets: list[str | None] = []
        if isinstance(node, ast.Import):
            targets = [_resolve(alias.name, modules) for alias in node.names]
        else:
            if node.level:
                base = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            for alias in node.names:
                sub = f"{origin}.{alias.name}"  # ``from pkg import module`` imports the module
                targets.append(sub if sub in modules else _resolve(origin, modules))
        for target in dict.fromkeys(targets):
            if target is not None and target != module:
                out.append(Import(module, target, path, node.lineno, typing_only))
    return sorted(out, key=lambda i: (i.line, i.target))


@functools.cache
def graph() -> tuple[Import, ...]:
    modules = _modules()
    return tuple(i for name, (path, package) in modules.items() for i in imports_of(name, path, package, modules))


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _report(what: str, bad: Iterable) -> str:
    return what + ":\n  " + "\n  ".join(str(b) for b in bad)


def cycles(edges: Iterable[Import]) -> list[list[Import]]:
    """The circles: for each strongly connected component of more than one module, its edges."""
    adj: dict[str, set[str]] = {}
    for e in edges:
        adj.setdefault(e.source, set()).add(e.target)
        adj.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    comps: list[set[str]] = []
    for root in sorted(adj):  # Tarjan's, iterative
        if root in index:
            continue
        work = [(root, iter(sorted(adj[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(adj[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(comp)
    return [sorted((e for e in edges if e.source in comp and e.target in comp), key=str) for comp in comps]


# ----------------------------------------------------------------------------- the checker itself
def test_the_graph_has_module_level_relative_and_function_local_imports():
    edges = {(i.source, i.target, i.type_checking) for i in graph()}
    assert ("storage.log", "storage.compaction", False) in edges  # from . import compaction
    assert ("broker.server", "broker.handlers", False) in edges  # from .handlers import ...
    assert ("broker.handlers.find_coordinator", "broker.share.coordinator", False) in edges  # inside a function
    assert ("storage.compaction", "storage.log", True) in edges  # under if TYPE_CHECKING
    assert ("broker.coordinator.classic", "protocol.consumer_protocol", False) in edges  # absolute


def test_cycles_finds_a_circle_and_names_its_imports():
    p = ROOT / "x.py"
    edges = [Import("a", "b", p, 1, False), Import("b", "c", p, 2, False), Import("c", "a", p, 3, False), Import("c", "d", p, 4, False)]
    [circle] = cycles(edges)
    assert [(e.source, e.target) for e in circle] == [("a", "b"), ("b", "c"), ("c", "a")]
    assert str(circle[0]) == "x.py:1: a imports b"
    assert cycles(edges[:2] + edges[3:]) == []


# ----------------------------------------------------------------------------- the rules
def test_protocol_imports_nothing_of_storage_or_broker():
    bad = [i for i in graph() if _in(i.source, "protocol") and (_in(i.target, "storage") or _in(i.target, "broker"))]
    assert not bad, _report("protocol/ is the bottom layer (no sockets, no log, no broker)", bad)


def test_storage_imports_nothing_of_broker():
    bad = [i for i in graph() if _in(i.source, "storage") and _in(i.target, "broker")]
    assert not bad, _report("storage/ must not import broker/ (it logs through stdlib logging; broker/logs.py adapts)", bad)


def test_the_coordinator_runtime_imports_no_coordinator():
    bad = [i for i in graph() if _in(i.source, COORDINATOR_RUNTIME) and any(_in(i.target, c) for c in COORDINATORS)]
    assert not bad, _report("broker/coordinator_runtime/ must not import a coordinator (the coordinators plug their shards into it)", bad)


def _handler_coordinator_imports() -> list[Import]:
    return [i for i in graph() if _in(i.source, HANDLERS) and _in(i.target, COORDINATOR) and i.target not in ALLOWED_HANDLER_COORDINATOR_MODULES]


def test_handlers_reach_the_coordinator_only_through_its_service_and_errors():
    bad = [i for i in _handler_coordinator_imports() if (i.source, i.target) not in KNOWN_HANDLER_COORDINATOR_IMPORTS]
    assert not bad, _report(
        "a handler imports a coordinator module other than " + ", ".join(sorted(ALLOWED_HANDLER_COORDINATOR_MODULES))
        + " (give the service what the handler needs instead)", bad,
    )


def _handler_handler_imports() -> list[Import]:
    return [i for i in graph() if _in(i.source, HANDLERS) and _in(i.target, HANDLERS) and i.target != HANDLERS and i.target not in SHARED_HANDLER_MODULES]


def test_handlers_import_of_each_other_only_the_shared_modules():
    bad = [i for i in _handler_handler_imports() if (i.source, i.target) not in KNOWN_HANDLER_TO_HANDLER_IMPORTS]
    assert not bad, _report("a handler imports another handler's module (what they share goes in one of SHARED_HANDLER_MODULES)", bad)


def test_no_stale_allowance():
    """Each allow-list entry stands for an import there now: one gone must leave the list, so it cannot come back."""
    modules = _modules()
    coordinator = {(i.source, i.target) for i in _handler_coordinator_imports()}
    handlers = {(i.source, i.target) for i in _handler_handler_imports()}
    stale = sorted(KNOWN_HANDLER_COORDINATOR_IMPORTS - coordinator) + sorted(KNOWN_HANDLER_TO_HANDLER_IMPORTS - handlers)
    stale += sorted(m for m in SHARED_HANDLER_MODULES if m not in modules)
    assert not stale, "no longer imported (or no longer there): delete from test_architecture.py's lists:\n  " + "\n  ".join(map(str, stale))


def test_no_import_cycles_in_broker_or_storage():
    found = []
    for top in ("broker", "storage"):
        edges = [i for i in graph() if _in(i.source, top) and _in(i.target, top) and not i.type_checking]
        found += cycles(edges)
    assert not found, "import circles (each: the imports between its modules):\n" + "\n".join(
        "- " + ", ".join(sorted({e.source for e in circle})) + ":\n  " + "\n  ".join(map(str, circle)) for circle in found
    )


# ----------------------------------------------------------------------------- sizes
@dataclass(frozen=True)
class Sized:
    path: str  # from the root
    name: str  # the module's path, or the function's qualified name
    line: int
    lines: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.name} is {self.lines} lines"


def functions_of(tree: ast.AST, prefix: str = "") -> Iterable[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualified name, node) of every function of the tree: methods and nested functions too."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
            yield from functions_of(node, prefix + node.name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from functions_of(node, prefix + node.name + ".")
        else:
            yield from functions_of(node, prefix)


def sizes_of(rel: str, text: str) -> tuple[Sized, list[Sized]]:
    """The module's size and its functions' (from the ``def`` line to the last line)."""
    module = Sized(rel, rel, 1, len(text.splitlines()))
    funcs = [Sized(rel, name, node.lineno, node.end_lineno - node.lineno + 1) for name, node in functions_of(ast.parse(text, rel))]
    return module, funcs


@functools.cache
def sizes() -> tuple[tuple[Sized, ...], tuple[Sized, ...]]:
    modules, funcs = [], []
    for pkg in SIZED_PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            module, its = sizes_of(path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8"))
            modules.append(module)
            funcs += its
    return tuple(modules), tuple(funcs)


def test_sizes_measures_modules_methods_and_nested_functions():
    text = "class A:\n    def f(self):\n        def g():\n            pass\n\n        return g\n\n\nasync def h():\n    pass\n"
    module, funcs = sizes_of("x.py", text)
    assert module.lines == 10
    assert [(f.name, f.line, f.lines) for f in funcs] == [("A.f", 2, 5), ("A.f.g", 3, 2), ("h", 9, 2)]
    assert str(funcs[0]) == "x.py:2: A.f is 5 lines"


def test_no_module_or_function_too_long():
    modules, funcs = sizes()
    assert any(m.path == "storage/log.py" for m in modules) and any(f.name == "PartitionLog.append" for f in funcs)
    bad = [m for m in modules if m.lines > MAX_MODULE_LINES and m.path not in KNOWN_LONG_MODULES]
    bad += [f for f in funcs if f.lines > MAX_FUNCTION_LINES and (f.path, f.name) not in KNOWN_LONG_FUNCTIONS]
    assert not bad, _report(
        f"over {MAX_MODULE_LINES} lines a module, or {MAX_FUNCTION_LINES} a function (split it into named parts)", bad
    )


def test_no_stale_size_allowance():
    modules, funcs = sizes()
    long_modules = {m.path for m in modules if m.lines > MAX_MODULE_LINES}
    long_funcs = {(f.path, f.name) for f in funcs if f.lines > MAX_FUNCTION_LINES}
    stale = sorted(KNOWN_LONG_MODULES.keys() - long_modules) + sorted(KNOWN_LONG_FUNCTIONS - long_funcs)
    assert not stale, "no longer too long (or gone): delete from test_architecture.py's lists:\n  " + "\n  ".join(map(str, stale))
