"""The nemesis depends on no test harness: no module under nemesis/ imports `harness`, directly
or through any project module it imports (the harness depends on the nemesis, one way; the
nemesis reaches a cluster through its own port, `nemesis.port.Cluster`)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = frozenset(p.name for p in ROOT.iterdir()
                    if p.is_dir() and ((p / "__init__.py").exists() or p.name == "nemesis"))


def _file_of(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every project module `path` imports (at any depth of its code), with their parent
    packages (importing a.b.c runs a/__init__.py and a/b/__init__.py)."""
    module = _module_of(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                stem = ".".join([*base, node.module] if node.module else base)
            else:
                stem = node.module or ""
            names = [stem, *(f"{stem}.{a.name}" for a in node.names)]
        for name in names:
            if name.split(".")[0] not in PROJECT:
                continue
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                prefix = ".".join(parts[:i])
                if _file_of(prefix) is not None:
                    found.add(prefix)
    return found


def reachable(start: list[Path]) -> dict[str, str]:
    """Project module -> the module that first imported it, from `start` transitively."""
    seen: dict[str, str] = {_module_of(p): "" for p in start}
    todo = list(start)
    for _ in range(100_000):
        if not todo:
            break
        path = todo.pop()
        for name in sorted(imports_of(path)):
            if name not in seen:
                seen[name] = _module_of(path)
                file = _file_of(name)
                assert file is not None
                todo.append(file)
    return seen


def _chain(seen: dict[str, str], name: str) -> str:
    chain = [name]
    for _ in range(1000):
        if not seen.get(chain[-1]):
            break
        chain.append(seen[chain[-1]])
    return " <- ".join(chain)


def test_nemesis_never_imports_the_harness() -> None:
    modules = sorted((ROOT / "nemesis").rglob("*.py"))
    assert len(modules) > 10
    seen = reachable(modules)
    bad = [_chain(seen, m) for m in sorted(seen) if m == "harness" or m.startswith("harness.")]
    assert not bad, "nemesis imports the harness:\n" + "\n".join(bad)


def test_the_walk_finds_imports_at_any_depth() -> None:
    # the checker itself: the harness reaches the nemesis (the allowed direction), and an
    # import inside a function counts
    seen = reachable([ROOT / "harness" / "campaign.py"])
    assert "nemesis.runner" in seen and "nemesis.port" in seen
    assert "nemesis" in seen  # parent packages too
