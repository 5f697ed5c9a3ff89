"""The architecture the folder names promise (README "How it is built", STYLE.md), read from the code.

Every module of the four packages is parsed with `ast` (never imported), so an import hidden in a
function body counts as much as one at the top, and a module that would fail to import is still
checked.  Three rules:

* imports run one way, ``formats`` <- ``engine`` <- ``recorder`` <- ``cli``;
* ``formats`` and ``engine`` do no I/O and read no clock or unseeded randomness of their own;
* nothing anywhere deserialises with pickle or runs text as code (``eval``/``exec``).

`KNOWN` lists a violation that is reported to its owner and not fixed yet.  The tests compare the
violations found with it exactly, so a new violation fails, and so does fixing a known one until it
is removed from the list.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("formats", "engine", "recorder", "cli")

#: What each package may import of ours: everything to its left in formats <- engine <- recorder <- cli.
MAY_IMPORT = {
    "formats": {"formats"},
    "engine": {"formats", "engine"},
    "recorder": {"formats", "engine", "recorder"},
    "cli": set(PACKAGES),
}

#: Modules that mean I/O, threads or hidden randomness/time when `formats` or `engine` imports them
#: (the engine's clock is an argument and its randomness `engine.model.javarandom`, seeded by the caller).
NO_IO_MODULES = {
    "socket", "subprocess", "threading", "multiprocessing", "concurrent", "asyncio", "random", "time",
    "os", "shutil", "tempfile", "select", "selectors", "urllib", "http",
}
#: Methods whose call reads or writes a file, whatever object they are called on.
FILE_METHODS = {"open", "read_text", "read_bytes", "write_text", "write_bytes", "memory_map", "OSFile"}
#: Calls that read the wall clock.
CLOCK_CALLS = {("datetime", "now"), ("datetime", "utcnow"), ("date", "today"), ("time", "time"),
               ("time", "time_ns"), ("time", "monotonic"), ("time", "perf_counter")}
#: Built-ins that do I/O.
IO_BUILTINS = {"open", "print", "input"}

#: Modules that unpickle (or run code from data) when they load.
UNSAFE_MODULES = {"pickle", "cPickle", "_pickle", "shelve", "marshal", "dill", "cloudpickle", "jsonpickle"}
UNSAFE_BUILTINS = {"eval", "exec"}

#: (module, what) found and reported but not fixed by the module's owner yet.
KNOWN = {
    # Only socket.inet_ntop/inet_pton, to format addresses (`ipaddress` does the same without socket).
    ("formats.pcap", "imports socket"),
}


@dataclass(frozen=True)
class Module:
    name: str
    package: str
    path: Path
    tree: ast.Module


def _modules() -> list[Module]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found.append(Module(name, package, path, ast.parse(path.read_text(encoding="utf-8"), str(path))))
    return found


MODULES = _modules()


def _from_module(module: Module, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    base = module.name.split(".")
    base = base[: len(base) - node.level + (1 if module.path.name == "__init__.py" else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: Module) -> list[tuple[int, str]]:
    """(line, absolute module name) for every import anywhere in the module, relative ones resolved,
    and `importlib.import_module("literal")` calls too."""
    found = []
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            prefix = _from_module(module, node)
            # `from formats import sbe` imports the module formats.sbe: judge it by its package anyway.
            found.append((node.lineno, prefix))
        elif (isinstance(node, ast.Call) and _call_name(node.func) in ("importlib.import_module", "import_module")
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.append((node.lineno, node.args[0].value))
    return found


def _call_name(func: ast.expr) -> str:
    """``a.b.c`` for a call of ``a.b.c(...)``; '' when it is not a dotted name."""
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        return ""
    parts.append(func.id)
    return ".".join(reversed(parts))


def _calls(module: Module):
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Call):
            yield node


def _where(module: Module, line: int) -> str:
    return f"{module.path.relative_to(ROOT)}:{line}"


def import_direction_violations(package: str, modules: list[Module] = MODULES) -> dict[tuple[str, str], str]:
    violations = {}
    for module in (m for m in modules if m.package == package):
        for line, name in _imports(module):
            top = name.split(".")[0]
            if top in PACKAGES and top not in MAY_IMPORT[package]:
                violations[(module.name, f"imports {name}")] = _where(module, line)
    return violations


def io_violations(package: str, modules: list[Module] = MODULES) -> dict[tuple[str, str], str]:
    violations = {}
    for module in (m for m in modules if m.package == package):
        for line, name in _imports(module):
            if name.split(".")[0] in NO_IO_MODULES:
                violations[(module.name, f"imports {name.split('.')[0]}")] = _where(module, line)
        for call in _calls(module):
            dotted = _call_name(call.func)
            last_two = tuple(dotted.split(".")[-2:])
            if isinstance(call.func, ast.Name) and call.func.id in IO_BUILTINS:
                violations[(module.name, f"calls {call.func.id}()")] = _where(module, call.lineno)
            elif isinstance(call.func, ast.Attribute) and call.func.attr in FILE_METHODS:
                violations[(module.name, f"calls .{call.func.attr}()")] = _where(module, call.lineno)
            elif last_two in CLOCK_CALLS:
                violations[(module.name, f"calls {'.'.join(last_two)}()")] = _where(module, call.lineno)
    return violations


def unsafe_violations(package: str, modules: list[Module] = MODULES) -> dict[tuple[str, str], str]:
    violations = {}
    for module in (m for m in modules if m.package == package):
        for line, name in _imports(module):
            if name.split(".")[0] in UNSAFE_MODULES:
                violations[(module.name, f"imports {name}")] = _where(module, line)
        for call in _calls(module):
            if isinstance(call.func, ast.Name) and call.func.id in UNSAFE_BUILTINS:
                violations[(module.name, f"calls {call.func.id}()")] = _where(module, call.lineno)
    return violations


def _known(package: str) -> set[tuple[str, str]]:
    return {k for k in KNOWN if k[0].split(".")[0] == package}


def _check(found: dict[tuple[str, str], str], known: set[tuple[str, str]]) -> None:
    new = {f"{where}: {module} {what}" for (module, what), where in found.items() if (module, what) not in known}
    fixed = known - set(found)
    assert not new, "\n".join(sorted(new))
    assert not fixed, f"fixed, so remove from KNOWN: {sorted(fixed)}"


def test_the_four_packages_are_all_found_with_their_modules():
    assert {m.package for m in MODULES} == set(PACKAGES)
    names = {m.name for m in MODULES}
    assert {"formats.sbe", "engine.model.election", "recorder.convert", "cli.app"} <= names


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_run_one_way_from_formats_to_engine_to_recorder_to_cli(package):
    _check(import_direction_violations(package), set())


@pytest.mark.parametrize("package", ["formats", "engine"])
def test_formats_and_engine_do_no_io_and_read_no_clock_or_unseeded_randomness(package):
    _check(io_violations(package), _known(package))


#: The one pickle that is allowed: the TUI's checkpoints (`cli.tui.session.SharedParts`) are the session's
#: own replay objects packed in memory to keep a 1M-event index small, and unpacked from those bytes
#: only; nothing read from a file or the user ever reaches an unpickler (checked below).
IN_MEMORY_PICKLE = {("cli.tui.session", "imports pickle")}


@pytest.mark.parametrize("package", PACKAGES)
def test_no_package_unpickles_or_evaluates_text_as_code(package):
    _check(unsafe_violations(package), {k for k in IN_MEMORY_PICKLE if k[0].split(".")[0] == package})


def test_the_tuis_checkpoints_alone_use_pickle_and_only_on_bytes_they_packed_themselves():
    """In `cli.tui.session`, ``pickle`` is named only inside `SharedParts` (its ``pack`` and ``unpack``);
    ``unpack`` reads only what ``zlib.decompress`` gives back of a `Checkpoint`'s blob, made by ``pack``;
    the module opens no file and calls no ``pickle.load``/``loads``."""
    (module,) = [m for m in MODULES if m.name == "cli.tui.session"]
    classes = [node for node in module.tree.body if isinstance(node, ast.ClassDef)]
    (shared,) = [c for c in classes if c.name == "SharedParts"]
    inside = {id(node) for node in ast.walk(shared)}
    uses = [node for node in ast.walk(module.tree) if isinstance(node, ast.Name) and node.id == "pickle"]
    assert uses and all(id(node) in inside for node in uses)
    attributes = {node.attr for node in ast.walk(module.tree)
                  if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "pickle"}
    assert attributes <= {"Pickler", "Unpickler", "HIGHEST_PROTOCOL"}
    assert not [call for call in _calls(module) if isinstance(call.func, ast.Name) and call.func.id == "open"]
    source = ast.unparse(shared)
    assert "zlib.decompress(blob)" in source


# The checker itself, on small modules written here: each rule catches what it is for.


def _module_from(source: str, name: str) -> Module:
    package = name.split(".")[0]
    path = ROOT / Path(*name.split(".")).with_suffix(".py")
    return Module(name, package, path, ast.parse(source))


def _found(check, source: str, name: str) -> set[str]:
    return {what for (_, what) in check(name.split(".")[0], [_module_from(source, name)])}


def test_an_import_inside_a_function_is_seen():
    source = "def f():\n    from recorder import convert\n    import cli.output\n"
    assert _found(import_direction_violations, source, "engine.mod") == {"imports recorder", "imports cli.output"}


def test_relative_imports_resolve_from_the_module_or_package_they_are_in():
    source = "from .cluster import Simulation\nfrom .. import convert\n"
    package = _module_from(source, "recorder.simulate")
    package = Module(package.name, package.package, ROOT / "recorder" / "simulate" / "__init__.py", package.tree)
    assert [name for _, name in _imports(package)] == ["recorder.simulate.cluster", "recorder"]
    module = _module_from(source, "recorder.simulate.outputs")
    assert [name for _, name in _imports(module)] == ["recorder.simulate.cluster", "recorder"]


def test_a_recorder_module_importing_the_cli_is_a_violation_and_the_cli_importing_anything_is_not():
    assert _found(import_direction_violations, "import cli.output\n", "recorder.x") == {"imports cli.output"}
    assert _found(import_direction_violations, "import recorder, engine, formats\n", "cli.x") == set()


def test_io_clocks_threads_and_stdlib_random_are_caught_in_formats_and_engine():
    source = (
        "import threading\nfrom random import random\nimport datetime\n"
        "def f(path):\n    open(path)\n    path.read_bytes()\n    datetime.datetime.now()\n"
        "    import socket\n"
    )
    assert _found(io_violations, source, "engine.x") == {
        "imports threading", "imports random", "calls open()", "calls .read_bytes()", "calls datetime.now()",
        "imports socket"}
    assert _found(io_violations, "from engine.model.javarandom import JavaRandom\nx = JavaRandom(1)\n", "engine.x") == set()


def test_pickle_eval_and_exec_are_caught_anywhere():
    source = "import pickle\ndef f(text):\n    eval(text)\n    exec(text)\n"
    assert _found(unsafe_violations, source, "cli.x") == {"imports pickle", "calls eval()", "calls exec()"}
    assert _found(unsafe_violations, "def f(x):\n    return x.eval()\n", "cli.x") == set()


# -- the import graph ------------------------------------------------------------------------------------

#: The one cycle allowed: Aeron's own ConsensusModuleAgent and Election call each other, and the model
#: keeps that pair (the surface the election uses is declared in `engine.model.agent_surface`).
ALLOWED_CYCLES = [{"engine.model.agent", "engine.model.election"}]


def _is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
    )


def import_graph(modules: list[Module] = MODULES) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports when it runs (anywhere in it, a function body too; not
    what only a type checker reads under ``if TYPE_CHECKING:``).  ``from engine import replay`` is an
    edge to ``engine.replay``."""
    names = {m.name for m in modules}
    graph: dict[str, set[str]] = {}
    for module in modules:
        skipped = {
            id(inner) for node in ast.walk(module.tree) if _is_type_checking_block(node)
            for inner in ast.walk(node)
        }
        edges = graph.setdefault(module.name, set())
        for node in ast.walk(module.tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names if alias.name in names)
            elif isinstance(node, ast.ImportFrom):
                prefix = _from_module(module, node)
                for alias in node.names:
                    target = f"{prefix}.{alias.name}"
                    if target in names:
                        edges.add(target)
                    elif prefix in names:
                        edges.add(prefix)
        edges.discard(module.name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_cycle_finder_finds_a_cycle_and_nothing_else():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert cycles(graph) == [{"a", "b", "c"}]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_but_the_agent_and_its_election():
    found = cycles(import_graph())
    assert sorted(sorted(c) for c in found if c not in ALLOWED_CYCLES) == []


def test_the_election_uses_only_the_declared_surface_of_its_agent_and_the_agent_provides_it():
    import re

    from engine.model.agent import ConsensusModuleAgent
    from engine.model.agent_surface import ElectionAgent

    declared = {name for name in vars(ElectionAgent) if not name.startswith("_")} | set(
        getattr(ElectionAgent, "__annotations__", {})
    )
    used = set(re.findall(r"\bagent\.([A-Za-z_]\w*)", (ROOT / "engine" / "model" / "election.py").read_text(encoding="utf-8")))
    assert used - declared == set(), "declare these in engine/model/agent_surface.py"
    assert declared - used == set(), "no longer used by the election: drop them from the Protocol"
    slots = {name for cls in ConsensusModuleAgent.__mro__ for name in getattr(cls, "__slots__", ())}
    missing = {name for name in declared if not hasattr(ConsensusModuleAgent, name) and name not in slots}
    assert missing == set()


# -- inside the engine: the model, its harness, what runs on them ------------------------------------------

#: What each layer of the engine may import of the engine: the model is self-contained (one member, no
#: notion of a cluster, a recording or a trace); the harness drives models; the rest runs on both.
ENGINE_LAYERS = {
    "engine.model": {"engine.model"},
    "engine.harness": {"engine.model", "engine.harness"},
}


def engine_layer_violations(modules: list[Module] = MODULES) -> dict[tuple[str, str], str]:
    violations = {}
    for module in (m for m in modules if m.package == "engine"):
        layer = next((name for name in ENGINE_LAYERS if module.name == name or module.name.startswith(name + ".")), None)
        if layer is None:
            continue
        for line, name in _imports(module):
            if name.split(".")[0] != "engine":
                continue
            target = ".".join(name.split(".")[:2])
            if target not in ENGINE_LAYERS[layer]:
                violations[(module.name, f"imports {name}")] = _where(module, line)
    return violations


def test_the_model_imports_nothing_of_the_engine_outside_it_and_the_harness_only_the_model():
    _check(engine_layer_violations(), set())


def test_the_engine_layer_check_catches_a_model_that_reaches_into_the_harness_or_a_replay():
    model = Module("engine.model.x", "engine", ROOT / "engine" / "model" / "x.py",
                   ast.parse("from engine.harness.driver import ClusterDriver\nimport engine.replay\nfrom formats import sbe\n"))
    harness = Module("engine.harness.x", "engine", ROOT / "engine" / "harness" / "x.py",
                     ast.parse("from engine.model.node import Node\nfrom engine.trace import canonical\n"))
    found = engine_layer_violations([model, harness])
    assert set(found) == {
        ("engine.model.x", "imports engine.harness.driver"),
        ("engine.model.x", "imports engine.replay"),
        ("engine.harness.x", "imports engine.trace"),
    }


def test_the_engine_folders_show_the_model_and_the_harness():
    engine = ROOT / "engine"
    assert {p.name for p in engine.iterdir() if p.is_dir() and (p / "__init__.py").exists()} == {"model", "harness"}
    for layer in ("model", "harness"):
        doc = ast.get_docstring(ast.parse((engine / layer / "__init__.py").read_text(encoding="utf-8")))
        assert doc and "may import" in doc, f"engine/{layer}/__init__.py opens with its theory of operation"
