"""The import contract, checked on the source (an AST walk, no import-linter).

Every module of agent/, firmware_shims/ and host_tools/ is named as installed
(edgesynth.agent.*, edgesynth.firmware_shims.*, edgesynth.*) and every import
statement in it becomes an edge, wherever it stands: module level, class
body, try/except, or inside a function. The agent's dynamic imports through
agent/shims.py (``shim("drbg")``, ``load(BUILD)``) are edges too. Then:

(a) no cycle among modules;
(b) the agent imports no host code and only stdlib modules MicroPython has;
(c) the shims import neither the agent nor host code;
(d) within the agent only agent/shims.py imports the shims;
(e) every function-level import of an edgesynth module is in FUNCTION_LEVEL
    with its reason, so a new one fails until it is justified.
"""
import ast
import os
import subprocess
import sys
from collections import namedtuple

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# folder -> installed package name (pyproject.toml [tool.setuptools] package-dir)
ROOTS = {"host_tools": "edgesynth", "agent": "edgesynth.agent", "firmware_shims": "edgesynth.firmware_shims"}
# a board imports the device packages by their top-level folder names
BOARD_NAMES = {"agent": "edgesynth.agent", "firmware_shims": "edgesynth.firmware_shims"}
# ... and only device code does: a host `import agent` works in a checkout, not installed
# the host's scripts that MicroPython runs
MP_SCRIPTS = ("edgesynth.runtimes.mp_driver", "edgesynth.runtimes.mp_publisher", "edgesynth.runtimes.mp_stream_driver")

HOST, AGENT, SHIMS = "edgesynth", "edgesynth.agent", "edgesynth.firmware_shims"

# Modules MicroPython has (its stdlib, with the u-prefixed names of older
# ports, plus the board-only machine, micropython and ulab, and micropython-lib's
# umqtt, which a board installs with mip for agent/transport/mqtt.py).
MICROPYTHON = {
    "array", "asyncio", "binascii", "collections", "errno", "gc", "hashlib", "heapq", "io", "json",
    "machine", "math", "micropython", "os", "random", "re", "select", "socket", "struct", "sys",
    "time", "uctypes", "ulab", "umqtt", "zlib",
}
MICROPYTHON |= {"u" + m for m in MICROPYTHON if not m.startswith("u")}

# Function-level imports of edgesynth modules that stay, (importer, imported)
# -> why. A new one fails the test until it is moved to module level or
# listed here; an entry that no longer matches an import fails as stale.
UNLOAD = "device unloads construction code after the noise is drawn (agent.device.CONSTRUCTION)"
RELEASE = "device loads release code once construction code is unloaded: peak heap is counters + one phase"
HEAP = "device heap: loaded only by a device whose config or calls use it"
FUNCTION_LEVEL = {
    (SHIMS + ".drbg", SHIMS + ".entropy"): "device heap: the entropy source loads only when the platform seeds "
                                          "the DRBG "
                                          "(a seeded source never interns its names)",
    (AGENT + ".cdf", AGENT + ".cdf.build"): UNLOAD,
    (AGENT + ".cdf", AGENT + ".cdf.release"): RELEASE,
    (AGENT + ".marginals", AGENT + ".marginals.build"): UNLOAD,
    (AGENT + ".marginals", AGENT + ".marginals.release"): RELEASE,
    (AGENT + ".profile", AGENT + ".profile.build"): UNLOAD,
    (AGENT + ".profile", AGENT + ".profile.release"): RELEASE,
    (AGENT + ".device", AGENT + ".spec"): UNLOAD,
    (AGENT + ".device", AGENT + ".msgpack_out"): RELEASE,
    (AGENT + ".device", AGENT + ".cdf"): HEAP + " (a PrivHP-only device never loads the CDF code)",
    (AGENT + ".device", AGENT + ".profile"): HEAP + " (a PrivHP-only device never loads the profile code)",
    (AGENT + ".device", AGENT + ".privhp.block"): HEAP + " (update_block and the numeric facade)",
    (AGENT + ".spec", AGENT + ".dlap"): UNLOAD + "; the sampler loads only when noise is drawn (not on restore)",
    (AGENT + ".main_loop", AGENT + ".ledger"): HEAP + " (the ledger and persistence: a \"state\" block)",
    (AGENT + ".main_loop", AGENT + ".transport.mqtt"): HEAP + " (the MQTT publisher: an \"mqtt\" block)",
    (HOST + ".runtimes.mp_driver", AGENT): "a script MicroPython runs, not a host module: the bundle's `agent`",
    (HOST + ".runtimes.mp_stream_driver", AGENT): "a script MicroPython runs, not a host module: the bundle's `agent`",
}


def _within(name, package):
    return name == package or name.startswith(package + ".")


def module_names(roots):
    """{module name: path} for every .py file under each folder of ``roots``
    ({folder path: package name}); a package is named by its __init__.py."""
    found = {}
    for folder, package in roots.items():
        for base, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            rel = os.path.relpath(base, folder)
            parts = [package] + ([] if rel == "." else rel.split(os.sep))
            for f in sorted(files):
                if f.endswith(".py"):
                    name = ".".join(parts if f == "__init__.py" else parts + [f[:-3]])
                    found[name] = os.path.join(base, f)
    return found


def _absolute(name, aliases):
    head = name.split(".")[0]
    if head in aliases:
        return aliases[head] + name[len(head):]
    return name


# One import of a module: the imported module, the line, the enclosing
# function (dotted, None at module level) and whether it is a call through the
# agent's shims (shim("drbg"), load(BUILD)) rather than an import statement.
Edge = namedtuple("Edge", "target line function call")


class _Edges(ast.NodeVisitor):
    """The imports of one module, as Edges."""

    def __init__(self, name, is_package, modules, aliases):
        self.name, self.modules, self.aliases = name, modules, aliases
        self.package = name if is_package else name.rpartition(".")[0]
        self.edges = []
        self.unresolved = []  # dynamic imports the walk cannot name
        self._function = []
        self._shim_names = {}  # local name -> "shim" or "load", imported from the agent's shims
        self._constants = {}  # module-level NAME = __name__ + ".sub"

    def _add(self, target, node, call=False):
        self.edges.append(Edge(target, node.lineno, ".".join(self._function) or None, call))

    def _function_body(self, node):
        self._function.append(getattr(node, "name", "<lambda>"))
        self.generic_visit(node)
        self._function.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function_body

    def visit_Import(self, node):
        for alias in node.names:
            self._add(_absolute(alias.name, self.aliases), node)

    def visit_ImportFrom(self, node):
        if node.level:
            parts = self.package.split(".")
            base = ".".join(parts[:len(parts) - (node.level - 1)])
            pkg = base + ("." + node.module if node.module else "")
        else:
            pkg = _absolute(node.module, self.aliases)
        for alias in node.names:
            sub = pkg + "." + alias.name
            self._add(sub if sub in self.modules else pkg, node)
            if pkg == AGENT + ".shims" and alias.name in ("shim", "load"):
                self._shim_names[alias.asname or alias.name] = alias.name

    def visit_Assign(self, node):
        # NAME = __name__ + ".sub": the dotted name of a submodule, for load(NAME)
        v = node.value
        if (not self._function and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(v, ast.BinOp) and isinstance(v.op, ast.Add)
                and isinstance(v.left, ast.Name) and v.left.id == "__name__"
                and isinstance(v.right, ast.Constant) and isinstance(v.right.value, str)):
            self._constants[node.targets[0].id] = self.name + v.right.value
        self.generic_visit(node)

    def visit_Call(self, node):
        kind = isinstance(node.func, ast.Name) and self._shim_names.get(node.func.id)
        if kind:
            arg = node.args[0] if len(node.args) == 1 and not node.keywords else None
            if kind == "shim" and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                self._add(SHIMS + "." + arg.value, node, call=True)
            elif kind == "load" and isinstance(arg, ast.Name) and arg.id in self._constants:
                self._add(self._constants[arg.id], node, call=True)
            else:
                self.unresolved.append((node.lineno, ast.unparse(node)))
        self.generic_visit(node)


def import_graph(roots, aliases=None, aliased=lambda module: True):
    """The import edges of every module under ``roots`` ({folder: package}).

    Returns ({module: [Edge, ...]}, unresolved),
    ``unresolved`` listing (module, line, call) of dynamic imports through the
    agent's shims that the walk could not name. Relative imports are resolved;
    ``from pkg import name`` is an edge to pkg.name when that is a module,
    else to pkg; ``aliases`` maps a top-level name to the package it stands for
    in the modules ``aliased(module)`` accepts.
    """
    modules = module_names(roots)
    graph, unresolved = {}, []
    for name, path in modules.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        walker = _Edges(name, path.endswith("__init__.py"), modules, (aliases or {}) if aliased(name) else {})
        walker.visit(tree)
        graph[name] = walker.edges
        unresolved += [(name, line, call) for line, call in walker.unresolved]
    return graph, unresolved


def cycles(graph):
    """Strongly connected components of more than one module, each as a sorted
    list: every one is an import cycle. (A module importing itself is no cycle:
    it finds itself in sys.modules; test (e) still lists it when it is done in
    a function.)"""
    index, low, stack, found = {}, {}, [], []

    def connect(v):  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted({e.target for e in graph[v] if e.target in graph}):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(found)


def _describe(graph, component):
    """The edges inside one cycle, one per line, for the failure message."""
    inside = set(component)
    edges = sorted({(m, e.target, e.line, e.function or "") for m in component for e in graph[m] if e.target in inside})
    return "\n".join("  %s -> %s (line %d%s)" % (m, t, line, ", in %s()" % fn if fn else "")
                     for m, t, line, fn in edges)


@pytest.fixture(scope="module")
def graph():
    roots = {os.path.join(ROOT, folder): package for folder, package in ROOTS.items()}
    g, unresolved = import_graph(roots, BOARD_NAMES,
                                 lambda m: _within(m, AGENT) or _within(m, SHIMS) or m in MP_SCRIPTS)
    assert not unresolved, "dynamic imports through agent/shims.py the test cannot name " \
                           "(use shim(\"literal\") or load(NAME) with NAME = __name__ + \".sub\"): %s" % unresolved
    return g


def _edges(graph, where):
    return [(m, e) for m in sorted(graph) if where(m) for e in graph[m]]


def test_no_import_cycle(graph):
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n\n".join(_describe(graph, c) for c in found)


def test_agent_imports_no_host_code_and_only_micropython_modules(graph):
    bad = []
    for m, e in _edges(graph, lambda m: _within(m, AGENT)):
        if not (_within(e.target, AGENT) or _within(e.target, SHIMS) or e.target.split(".")[0] in MICROPYTHON):
            bad.append("%s line %d imports %s" % (m, e.line, e.target))
    assert not bad, "\n".join(bad)


def test_host_imports_the_device_packages_by_their_installed_names(graph):
    """`import agent` or `import host_tools` works in a checkout only: an
    installed host has edgesynth.agent and edgesynth.firmware_shims."""
    bad = ["%s line %d imports %s" % (m, e.line, e.target) for m, e in _edges(graph, lambda m: not (
        _within(m, AGENT) or _within(m, SHIMS) or m in MP_SCRIPTS))
           if e.target.split(".")[0] in ("agent", "firmware_shims", "host_tools")]
    assert not bad, bad


def test_shims_import_neither_agent_nor_host(graph):
    bad = ["%s line %d imports %s" % (m, e.line, e.target) for m, e in _edges(graph, lambda m: _within(m, SHIMS))
           if _within(e.target, HOST) and not _within(e.target, SHIMS)]
    assert not bad, "\n".join(bad)


def test_only_agent_shims_imports_the_shims(graph):
    # shim("name") calls are the sanctioned door; import statements are not
    bad = ["%s line %d imports %s" % (m, e.line, e.target) for m, e in _edges(graph, lambda m: _within(m, AGENT))
           if m != AGENT + ".shims" and _within(e.target, SHIMS) and not e.call]
    assert not bad, "\n".join(bad)


def function_level(graph, package=HOST):
    """{(importer, imported): [line, ...]} of imports of ``package``'s modules
    made inside a function (shim()/load() calls excluded: they are the door
    agent/shims.py opens on purpose, one phase or one shim at a time)."""
    found = {}
    for m in sorted(graph):
        for e in graph[m]:
            if e.function is not None and not e.call and _within(e.target, package):
                found.setdefault((m, e.target), set()).add(e.line)
    return {k: sorted(v) for k, v in found.items()}


def test_function_level_imports_are_justified(graph):
    found = function_level(graph)
    new = ["%s line %s imports %s" % (m, ",".join(map(str, lines)), t)
           for (m, t), lines in sorted(found.items()) if (m, t) not in FUNCTION_LEVEL]
    stale = sorted(k for k in FUNCTION_LEVEL if k not in found)
    assert not new, "function-level imports without a reason in FUNCTION_LEVEL " \
                    "(move them to module level, or list them with why):\n" + "\n".join(new)
    assert not stale, "FUNCTION_LEVEL entries that no longer match an import: %s" % stale


def test_frames_does_not_import_scipy():
    code = "import edgesynth.frames, sys; print('scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False", "importing edgesynth.frames loads scipy"


def _write(root, rel, text):
    path = os.path.join(str(root), rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def test_graph_finds_a_cycle_hidden_in_a_function(tmp_path):
    _write(tmp_path, "pkg/__init__.py", "")
    _write(tmp_path, "pkg/a.py", "from . import b\n")
    _write(tmp_path, "pkg/b.py", "def f():\n    try:\n        from .sub.c import x\n"
                                 "    except ImportError:\n        pass\n")
    _write(tmp_path, "pkg/sub/__init__.py", "")
    _write(tmp_path, "pkg/sub/c.py", "import fake.a\n")
    _write(tmp_path, "pkg/sub/d.py", "from fake import sub\n")
    g, unresolved = import_graph({str(tmp_path / "pkg"): "fake"}, {"pkg": "fake"})
    assert not unresolved
    assert ("fake.sub.c", 3, "f", False) in g["fake.b"]
    assert g["fake.sub.d"] == [("fake.sub", 1, None, False)]
    assert cycles(g) == [["fake.a", "fake.b", "fake.sub.c"]]
    assert function_level(g, "fake") == {("fake.b", "fake.sub.c"): [3]}
    g["fake.sub.c"] = []
    assert cycles(g) == []


def test_graph_follows_the_agents_shim_calls(tmp_path):
    _write(tmp_path, "agent/__init__.py", "")
    _write(tmp_path, "agent/shims.py", "")
    _write(tmp_path, "agent/m.py", "from .shims import load, shim\nB = __name__ + '.b'\n"
                                   "def f():\n    return shim('drbg'), load(B)\n")
    _write(tmp_path, "agent/n.py", "from .shims import shim\nx = shim(NAME)\n")
    g, unresolved = import_graph({str(tmp_path / "agent"): AGENT})
    assert (SHIMS + ".drbg", 4, "f", True) in g[AGENT + ".m"]
    assert (AGENT + ".m.b", 4, "f", True) in g[AGENT + ".m"]
    assert unresolved == [(AGENT + ".n", 2, "shim(NAME)")]
