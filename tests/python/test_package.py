# The package's own modules import one another without a circle (lazy imports inside functions
# count too): psched.array needs neither psched.client nor psched.cluster, and the default client
# lives in psched._context for it.
import ast
import pathlib

import pytest

psched = pytest.importorskip("psched")
ROOT = pathlib.Path(psched.__file__).parent


def module_name(path):
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path):
    """The psched modules a source file imports, wherever in the file (absolute or relative)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("psched")}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("psched"):
                continue
            for a in node.names:  # "from . import x" imports the submodule x when there is one
                sub = f"{target}.{a.name}"
                out.add(sub if any(module_name(p) == sub for p in ROOT.rglob("*.py")) else target)
    out.discard(name)
    return out


def test_no_import_circle_among_the_packages_modules():
    graph = {module_name(p): imports_of(p) for p in ROOT.rglob("*.py")}
    # A module importing its own parent package is how Python loads it, not a dependency.
    graph = {m: {d for d in deps if d in graph and not m.startswith(d + ".")} for m, deps in graph.items()}
    assert "psched.client" not in graph["psched.array._core"] and "psched.client" not in graph["psched.array._creation"]
    state = {}

    def visit(m, path):
        if state.get(m) == "done":
            return
        assert state.get(m) != "open", "import circle: " + " -> ".join(path + [m])
        state[m] = "open"
        for d in sorted(graph[m]):
            visit(d, path + [m])
        state[m] = "done"

    for m in sorted(graph):
        visit(m, [])
