"""The core is a value-to-value function: stdlib only, no I/O, clock, randomness, logging or
threads, and the same answers whatever PYTHONHASHSEED is."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "core"
FORBIDDEN = {
    "random", "time", "datetime", "os", "sys", "socket", "threading", "asyncio", "logging",
    "subprocess", "io", "pathlib", "secrets", "uuid", "multiprocessing", "signal", "select",
    "selectors", "shutil", "tempfile", "concurrent",
}
FORBIDDEN_CALLS = {"open", "print", "input", "exec", "eval", "id", "hash"}


def _modules() -> list[Path]:
    files = sorted(CORE.rglob("*.py"))
    assert len(files) >= 10
    return files


def test_core_imports_only_the_standard_library_and_itself() -> None:
    for path in _modules():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                assert top == "core" or top == "__future__" or top in sys.stdlib_module_names, (
                    f"{path.name} imports {name}, outside the standard library"
                )
                assert top not in FORBIDDEN, f"{path.name} imports {name}: I/O, time or chance"


def test_core_calls_no_io_or_identity_functions() -> None:
    for path in _modules():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in FORBIDDEN_CALLS, (
                    f"{path.name}:{node.lineno} calls {node.func.id}()"
                )


def test_core_never_iterates_a_set() -> None:
    """Set order depends on PYTHONHASHSEED (DESIGN rule 8): `for x in <set>` is banned; the
    core iterates tuples and sorted containers only."""
    for path in _modules():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.For, ast.comprehension)):
                it = node.iter
                if isinstance(it, ast.Call) and isinstance(it.func, ast.Name):
                    assert it.func.id not in ("set", "frozenset"), (
                        f"{path.name}:{getattr(node, 'lineno', '?')} iterates a set"
                    )
                assert not isinstance(it, (ast.Set, ast.SetComp)), f"{path.name} iterates a set"


_PROGRAM = """
from spec.bugs import by_name
from spec.checker import check
from spec.model import Model
b = by_name("acks-1")
r = check(Model(b.config(), b.bounds))
print(r.states, r.transitions, r.violation, [a for a, _ in r.trace])
b = by_name("truncate-to-hw")
from dataclasses import replace
r = check(Model(b.config(), replace(b.bounds, brokers=2, crashes=1, expiries=1, records=1)))
print(r.states, r.transitions, r.violation, [a for a, _ in r.trace])
"""


def test_results_do_not_depend_on_hash_seed() -> None:
    outputs = []
    for seed in ("0", "1", "4242"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        run = subprocess.run([sys.executable, "-c", _PROGRAM], env=env, capture_output=True,
                             text=True, timeout=300, check=True)
        outputs.append(run.stdout)
    assert outputs[0] == outputs[1] == outputs[2]
    assert "leader_completeness" in outputs[0]
