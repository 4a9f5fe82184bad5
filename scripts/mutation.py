"""Mutation testing of the pure core: a small AST mutation runner (see docs/mutation.md).

Why not mutmut: mutmut 3.x mutates only inside functions and methods (its trampolines replace
function bodies; module and class bodies are copied unchanged), so it never generates the
mutants that matter most in a protocol core of values: Kafka's error codes (an IntEnum),
UNDEFINED_EPOCH, MAX_SEQUENCE, the configuration defaults. This runner mutates every line.

One mutant at a time: the file's source is changed in one place, and the fast test layer
(`tests/core`, without the hash-seed subprocess test) runs against it in a forked child of a
process that has pytest and Hypothesis loaded but not the target, with an import hook that
serves the mutated source in place of the file. A mutant is killed when a test fails, when the
module does not import, or when the tests time out; it survives when every test passes.

Mutations (one per mutant): comparison operators (== !=, < <=, > >=, in / not in, is / is not),
+ and -, and / or, integer constants +1 and -1, booleans flipped, negated if / elif / while /
conditional-expression conditions, min <-> max, and removed statements (an expression, an
assignment or an augmented assignment inside a function becomes `pass`). Docstrings, string
constants and type annotations are not mutated.

    uv run python scripts/mutation.py [--jobs 2] [--files core/replica.py ...] [--json OUT]
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import importlib.abc
import importlib.util
import json
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FILES = (
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "core").rglob("*.py")),
    "spec/invariants.py",
)
# The fast layer: rule-level tests and the event-by-event core tests (seconds, not minutes).
CORE_TESTS = ("tests/core/rules", "tests/core/test_rules.py", "tests/core/test_replica.py",
              "tests/core/test_topic_config.py", "tests/core/test_controlled_shutdown.py",
              "tests/core/test_replica_paths.py", "tests/core/test_controller_paths.py")
SPEC_TESTS = ("tests/spec/test_regressions.py", "tests/spec/test_controlled_shutdown_model.py",
              "tests/spec/test_invariants.py")

_SWAP_CMP: dict[type, type] = {
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.LtE, ast.LtE: ast.Lt,
    ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.In: ast.NotIn, ast.NotIn: ast.In,
    ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}
_OPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
        ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}


@dataclass(frozen=True)
class Mutant:
    file: str
    index: int  # n-th mutation site of the file, in the order `sites` yields them
    line: int
    kind: str
    description: str
    code: str  # the mutated line, stripped: how docs/mutation.md names an equivalent mutant


@dataclass
class Result:
    mutant: Mutant
    status: str  # killed | survived | timeout
    seconds: float


# ---------------------------------------------------------------------------------------
# mutation sites


def _docstring_ids(tree: ast.AST) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0]))
    return out


def _annotation_ids(tree: ast.AST) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        anns: list[ast.AST | None] = []
        if isinstance(node, (ast.AnnAssign, ast.arg)):
            anns.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            anns.append(node.returns)
        for a in anns:
            if a is not None:
                out.update(id(n) for n in ast.walk(a))
    return out


def _inside_functions(tree: ast.AST) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for stmt in node.body:
                out.update(id(n) for n in ast.walk(stmt))
    return out


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def sites(tree: ast.AST) -> Iterator[tuple[ast.AST, str, str, int]]:
    """Every (node, kind, description, variant) that can be mutated, in a fixed order."""
    docs = _docstring_ids(tree)
    anns = _annotation_ids(tree)
    in_fn = _inside_functions(tree)
    for node in ast.walk(tree):
        if id(node) in anns:
            continue
        if isinstance(node, ast.Compare):
            for k, op in enumerate(node.ops):
                new = _SWAP_CMP[type(op)]
                yield node, "compare", f"{_OPS[type(op)]} -> {_OPS[new]}", k
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
            if isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
                continue  # string concatenation
            desc = "+ -> -" if isinstance(node.op, ast.Add) else "- -> +"
            yield node, "arith", desc, 0
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add | ast.Sub):
            if id(node) in in_fn and not _is_list_extend(node):
                desc = "+= -> -=" if isinstance(node.op, ast.Add) else "-= -> +="
                yield node, "arith", desc, 0
        elif isinstance(node, ast.BoolOp):
            desc = "and -> or" if isinstance(node.op, ast.And) else "or -> and"
            yield node, "boolop", desc, 0
        elif isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bool):
                yield node, "constant", f"{v} -> {not v}", 0
            elif isinstance(v, int):
                yield node, "constant", f"{v} -> {v + 1}", 1
                yield node, "constant", f"{v} -> {v - 1}", -1
        elif isinstance(node, ast.If | ast.While | ast.IfExp):
            if isinstance(node, ast.If) and _is_type_checking(node):
                continue
            yield node, "negate", "condition negated", 0
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("min", "max")):
            other = "max" if node.func.id == "min" else "min"
            yield node, "minmax", f"{node.func.id} -> {other}", 0
        if (isinstance(node, ast.Expr | ast.Assign | ast.AugAssign) and id(node) in in_fn
                and id(node) not in docs):
            yield node, "remove", "statement removed", 0


def _is_list_extend(node: ast.AugAssign) -> bool:
    """`out += [...]` / `out += e` on effect lists: `-=` would be a TypeError, not a mutant
    worth the time; removing the statement is mutated instead."""
    return isinstance(node.target, ast.Name) and node.target.id in ("out", "replicas")


class _Apply(ast.NodeTransformer):
    def __init__(self, target: ast.AST, kind: str, variant: int) -> None:
        self.target, self.kind, self.variant = target, kind, variant

    def visit(self, node: ast.AST) -> ast.AST:
        if node is not self.target:
            return super().visit(node)
        k, v = self.kind, self.variant
        if k == "compare":
            assert isinstance(node, ast.Compare)
            node.ops[v] = _SWAP_CMP[type(node.ops[v])]()
        elif k == "arith" and isinstance(node, ast.BinOp | ast.AugAssign):
            node.op = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
        elif k == "boolop":
            assert isinstance(node, ast.BoolOp)
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        elif k == "constant":
            assert isinstance(node, ast.Constant)
            node.value = (not node.value) if isinstance(node.value, bool) else node.value + v
        elif k == "negate":
            assert isinstance(node, ast.If | ast.While | ast.IfExp)
            node.test = ast.UnaryOp(op=ast.Not(), operand=node.test)
        elif k == "minmax":
            assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            node.func.id = "max" if node.func.id == "min" else "min"
        elif k == "remove":
            return ast.Pass()
        return node


_MUTANTS: dict[str, list[Mutant]] = {}


def mutants_of(file: str) -> list[Mutant]:
    if file not in _MUTANTS:
        _MUTANTS[file] = _mutants_of(file)
    return _MUTANTS[file]


def _mutants_of(file: str) -> list[Mutant]:
    text = (ROOT / file).read_text()
    lines = text.splitlines()
    tree = ast.parse(text, filename=file)
    out = []
    for i, (node, kind, desc, _) in enumerate(sites(tree)):
        line = getattr(node, "lineno", 0)
        out.append(Mutant(file, i, line, kind, desc, lines[line - 1].strip() if line else ""))
    return out


_PARSED: dict[str, tuple[ast.Module, list[tuple[ast.AST, str, str, int]]]] = {}


def parse_once(file: str) -> None:
    """Parse `file` and list its sites in the parent: a forked child mutates its own
    (copy-on-write) copy of the tree instead of parsing the file again."""
    if file not in _PARSED:
        tree = ast.parse((ROOT / file).read_text(), filename=file)
        _PARSED[file] = (tree, list(sites(tree)))


def mutated_source(m: Mutant) -> str:
    """The file's source with mutant `m` applied. Mutates the parsed tree in place: call it
    in a forked child (or on a file not parsed before), never twice in one process."""
    parse_once(m.file)
    tree, found = _PARSED.pop(m.file)
    node, kind, _, variant = found[m.index]
    tree = _Apply(node, kind, variant).visit(tree)
    ast.fix_missing_locations(tree)
    return ast.unparse(tree)


# ---------------------------------------------------------------------------------------
# running


def _module_name(file: str) -> str:
    p = Path(file).with_suffix("")
    parts = p.parts[:-1] if p.name == "__init__" else p.parts
    return ".".join(parts)


class _Serve(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serve `source` as module `name` (at its real path, so tracebacks still point there)."""

    def __init__(self, name: str, path: Path, source: str) -> None:
        self.name, self.path, self.source = name, path, source

    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        if fullname != self.name:
            return None
        is_pkg = self.path.name == "__init__.py"
        return importlib.util.spec_from_file_location(
            fullname, self.path, loader=self,
            submodule_search_locations=[str(self.path.parent)] if is_pkg else None,
        )

    def create_module(self, spec):  # type: ignore[no-untyped-def]
        return None

    def exec_module(self, module):  # type: ignore[no-untyped-def]
        exec(compile(self.source, str(self.path), "exec"), module.__dict__)


_PRIORITY = ("core/rules/", "core/producer.py", "core/replica.py", "core/controller.py",
             "core/node.py")


def _priority(file: str) -> int:
    return next((i for i, p in enumerate(_PRIORITY) if file.startswith(p)), len(_PRIORITY))


_PYTEST_ARGS = ("-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:timeout", "-o", "addopts=")
IMPORT = "<import>"  # lines run outside any test, or in a module or class body


class _Cover:
    """Which test runs which line of the targets (sys.settrace; Hypothesis is derandomized so
    a child replays exactly the examples seen here). Module and class bodies count as
    IMPORT: a constant there reaches every test that uses the module."""

    def __init__(self, files: list[str]) -> None:
        self.files = {str(ROOT / f): f for f in files}
        self.current = IMPORT
        self.hits: dict[str, set[tuple[str, int]]] = {}

    def global_trace(self, frame, event, arg):  # type: ignore[no-untyped-def]
        if frame.f_code.co_filename in self.files:
            self._hit(frame)
            return self.local_trace
        return None

    def local_trace(self, frame, event, arg):  # type: ignore[no-untyped-def]
        if event == "line":
            self._hit(frame)
        return self.local_trace

    def _hit(self, frame) -> None:  # type: ignore[no-untyped-def]
        code = frame.f_code
        who = self.current if code.co_flags & 0x1 else IMPORT  # CO_OPTIMIZED: a function
        self.hits.setdefault(who, set()).add((self.files[code.co_filename], frame.f_lineno))


def coverage(files: list[str], tests: list[str], out: Path) -> None:
    """Run `tests` once, unmutated, recording per test the target lines it runs."""
    pid = os.fork()
    if pid == 0:
        import pytest

        for name in [n for n in sys.modules if n.split(".")[0] in ("core", "spec")]:
            del sys.modules[name]  # imported afresh under the tracer: module bodies count
        cover = _Cover(files)
        durations: dict[str, float] = {}

        class Plugin:
            @pytest.hookimpl(hookwrapper=True)
            def pytest_runtest_protocol(self, item, nextitem):  # type: ignore[no-untyped-def]
                cover.current = item.nodeid
                t0 = time.perf_counter()
                yield
                durations[item.nodeid] = time.perf_counter() - t0
                cover.current = IMPORT

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        sys.settrace(cover.global_trace)
        code = pytest.main(["-q", *_PYTEST_ARGS, *tests], plugins=[Plugin()])
        sys.settrace(None)
        out.write_text(json.dumps({"hits": {k: sorted(v) for k, v in cover.hits.items()},
                                   "durations": durations}))
        os._exit(int(code))
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the unmutated code fails {' '.join(tests)}: fix that first")


def _site_lines(tree: ast.AST) -> list[set[int]]:
    """Per mutation site, the lines whose execution means the site ran: the node's own lines
    and the first line of the statement holding it."""
    holder: dict[int, int] = {}
    for node in ast.walk(tree):  # breadth-first: inner statements overwrite outer ones
        if isinstance(node, ast.stmt):
            for sub in ast.walk(node):
                holder[id(sub)] = node.lineno
    out = []
    for node, _, _, _ in sites(tree):
        first = getattr(node, "lineno", 0)
        last = getattr(node, "end_lineno", first) or first
        out.append(set(range(first, last + 1)) | {holder.get(id(node), first)})
    return out


def select_tests(m: Mutant, lines: set[int], hits: dict[str, set[tuple[str, int]]],
                 durations: dict[str, float]) -> list[str] | None:
    """The tests that run the mutated code, quickest first (pytest -x stops at the first
    failure); None: every test (the code runs at import)."""
    keys = {(m.file, n) for n in lines}
    if keys & hits.get(IMPORT, set()):
        return None
    return sorted((t for t, h in hits.items() if t != IMPORT and keys & h),
                  key=lambda t: (durations.get(t, 0.0), t))


def _tests_for(file: str) -> list[str]:
    tests = SPEC_TESTS if file.startswith("spec/") else CORE_TESTS
    return [t for t in tests if (ROOT / t).exists()]


def _imports(file: str) -> set[str]:
    """The core/spec modules whose objects `file` binds: `from a.b import c` binds module
    a.b.c if there is one, else names of a.b. (Importing a.b also runs package a, but a
    module that binds nothing of a does not go stale when a changes.)"""
    tree = ast.parse((ROOT / file).read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                out.add(sub if _file_of(sub) else node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {n for n in out if n.split(".")[0] in ("core", "spec") and _file_of(n)}


def _file_of(module: str) -> str | None:
    p = ROOT / Path(*module.split("."))
    for f in (p.with_suffix(".py"), p / "__init__.py"):
        if f.exists():
            return str(f.relative_to(ROOT))
    return None


_DEPENDENTS: dict[str, set[str]] = {}


def dependents(target: str) -> set[str]:
    """Modules that must be executed afresh when `target` changes: it and every core/spec
    module that imports it, directly or not (computed once per file, in the parent)."""
    if target not in _DEPENDENTS:
        _DEPENDENTS[target] = _dependents(target)
    return _DEPENDENTS[target]


def _dependents(target: str) -> set[str]:
    files = [str(p.relative_to(ROOT)) for d in ("core", "spec") for p in (ROOT / d).rglob("*.py")]
    graph = {_module_name(f): _imports(f) for f in files}
    out = {_module_name(target)}
    grew = True
    while grew:
        grew = False
        for mod, deps in graph.items():
            if mod not in out and deps & out:
                out.add(mod)
                grew = True
    return out


def _child(m: Mutant | None, tests: list[str]) -> None:
    """In the forked child: install the mutant, run the tests, exit with pytest's code."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    if m is not None:
        try:
            source = mutated_source(m)
        except Exception:
            os._exit(99)
        for name in dependents(m.file):
            sys.modules.pop(name, None)
        sys.meta_path.insert(0, _Serve(_module_name(m.file), ROOT / m.file, source))
    import pytest

    code = pytest.main(["-x", "-q", *_PYTEST_ARGS, *tests])
    os._exit(int(code))


def _prepare() -> None:
    """Load what the tests need, except the targets, once in the parent (the children fork
    from here, so each starts in milliseconds)."""
    import hypothesis
    import kio.schema.errors  # noqa: F401 - what the tests import besides the targets
    import pytest  # noqa: F401
    from _pytest.config import default_plugins

    # No shrinking: a mutant is killed by the first failing example; shrinking it to a
    # minimal one (seconds per mutant in the Hypothesis-heavy assignment tests) changes no
    # verdict. Generation is unchanged, so the examples are those of the recording run.
    hypothesis.settings.register_profile(
        "mutation", database=None, derandomize=True, deadline=None, print_blob=False,
        phases=(hypothesis.Phase.explicit, hypothesis.Phase.generate),
    )
    hypothesis.settings.load_profile("mutation")
    # The targets too, unmutated: a child drops and re-imports only the mutated module and
    # the modules that import it (see `dependents`).
    import core.node  # noqa: F401

    # pytest's own plugins, which pytest.main would otherwise import in every child.
    for name in default_plugins:
        with contextlib.suppress(ImportError):
            importlib.import_module(f"_pytest.{name}")


def _fork(m: Mutant | None, tests: list[str]) -> int:
    pid = os.fork()
    if pid == 0:
        os.setpgid(0, 0)
        _child(m, tests)
    return pid


def run(mutants: list[Mutant], tests: dict[Mutant, list[str]], jobs: int, timeout_s: float,
        log: Path | None) -> list[Result]:
    results: list[Result] = []
    queue = [m for m in mutants if tests[m]]
    for file in {m.file for m in queue}:  # once here rather than once per child
        parse_once(file)
        dependents(file)
    # Nothing allocated so far is garbage: a child's collections (pytest collects twice on
    # the way out) then scan only what the child allocated, not the parent's heap.
    import gc

    gc.collect()
    gc.freeze()
    logf = log.open("a") if log else None
    for m in mutants:
        if not tests[m]:
            results.append(Result(m, "survived", 0.0))
            if logf:
                logf.write(json.dumps(asdict(results[-1])) + "\n")
            print(f"  survived (no test runs it) {m.file}:{m.line} {m.description}: {m.code}",
                  flush=True)
    running: dict[int, tuple[Mutant, float]] = {}
    total = len(queue)
    while queue or running:
        while queue and len(running) < jobs:
            m = queue.pop(0)
            running[_fork(m, tests[m])] = (m, time.monotonic())
        time.sleep(0.02)
        for pid, (m, started) in list(running.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            elapsed = time.monotonic() - started
            if done == 0:
                if elapsed > timeout_s:
                    os.killpg(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    del running[pid]
                    results.append(Result(m, "timeout", elapsed))
                else:
                    continue
            else:
                del running[pid]
                code = os.waitstatus_to_exitcode(status)
                results.append(Result(m, "survived" if code == 0 else "killed", elapsed))
            r = results[-1]
            if logf:
                logf.write(json.dumps(asdict(r)) + "\n")
                logf.flush()
            if r.status == "survived":
                print(f"  survived {m.file}:{m.line} {m.description}: {m.code}", flush=True)
            if len(results) % 100 == 0:
                print(f"  {len(results)}/{total} mutants judged", flush=True)
    return results


def baseline(tests: list[str]) -> float:
    started = time.monotonic()
    pid = _fork(None, tests)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the unmutated code fails {' '.join(tests)}: fix that first")
    return time.monotonic() - started


Listed = set[tuple[str, str, str, int]]  # (file, line text, mutation, occurrence or 0)


def _equivalent(m: Mutant, listed: Listed) -> bool:
    """Listed without an occurrence: every such mutation of that line text; with `#k`: only
    the k-th (a line with two `<`, say, has two `< -> <=` mutants, equivalent or not apart)."""
    return bool({(m.file, m.code, m.description, 0),
                 (m.file, m.code, m.description, _occurrence_on_line(m) + 1)} & listed)


def _occurrence_on_line(m: Mutant) -> int:
    """Which of the same mutations of this very line (by index) `m` is, from 0."""
    same = [x for x in mutants_of(m.file)
            if (x.line, x.kind, x.description) == (m.line, m.kind, m.description)]
    return same.index(m)


def _ambiguous(listed: Listed) -> list[str]:
    """Table rows without an occurrence that match more than one mutant of a line: each of
    them must be judged equivalent on its own, so the row must say which (`#k`)."""
    out = []
    for file, code, desc, k in sorted(listed):
        if k or not (ROOT / file).exists():
            continue
        lines = Counter(m.line for m in mutants_of(file)
                        if (m.code, m.description) == (code, desc))
        if any(c > 1 for c in lines.values()):
            out.append(f"{file} `{code}` {desc}")
    return out


def report(results: list[Result], listed: Listed) -> dict[str, dict[str, int]]:
    per: dict[str, dict[str, int]] = {}
    for r in results:
        d = per.setdefault(r.mutant.file, {"mutants": 0, "killed": 0, "equivalent": 0,
                                           "survived": 0})
        d["mutants"] += 1
        if r.status in ("killed", "timeout"):
            d["killed"] += 1
        elif _equivalent(r.mutant, listed):
            d["equivalent"] += 1
        else:
            d["survived"] += 1
    return per


def _equivalents() -> Listed:
    """Mutants docs/mutation.md lists as equivalent, as table rows
    `| core/x.py | `the line` | the mutation | why |` (by line text, not number, so edits
    elsewhere in the file do not unlist them); `the mutation #2`: the second such mutation
    of that line only."""
    doc = ROOT / "docs" / "mutation.md"
    out: Listed = set()
    if not doc.exists():
        return out
    for line in doc.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0].endswith(".py") and cells[1].startswith("`"):
            desc, _, k = cells[2].partition(" #")
            out.add((cells[0], cells[1].strip("`").replace("\\|", "|"), desc,
                     int(k) if k.isdigit() else 0))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", nargs="*", default=list(DEFAULT_FILES))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", type=Path, default=ROOT / ".mutation" / "results.json")
    ap.add_argument("--limit", type=int, default=0, help="judge only the first N mutants")
    ap.add_argument("--list", action="store_true", help="list the mutants and stop")
    ap.add_argument("--sample", type=float, default=1.0,
                    help="judge a random fraction of each file's mutants (an estimate)")
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--resume", type=Path, nargs="*", default=[],
                    help="results (.jsonl) of earlier runs: mutants killed there are not run "
                         "again (tests are only ever added), survivors are")
    ap.add_argument("--uncovered", action="store_true",
                    help="list the mutants on lines no test runs (they survive) and stop")
    ap.add_argument("--survivors-only", action="store_true",
                    help="judge only the mutants that survived in the --resume files")
    ap.add_argument("--report", action="store_true",
                    help="print the table for the verdicts in --resume files and stop")
    args = ap.parse_args()
    mutants = [m for f in args.files for m in mutants_of(f)]
    earlier = _earlier(args.resume)
    if args.report:
        judged = [Result(m, earlier[_key(m)], 0.0) for m in mutants if _key(m) in earlier]
        _table(report(judged, _equivalents()), {f: len(mutants_of(f)) for f in args.files})
        for row in _ambiguous(_equivalents()):
            print(f"  docs/mutation.md lists more than one mutant of a line, say which (#k): "
                  f"{row}")
        for r in judged:
            if r.status == "survived" and not _equivalent(r.mutant, _equivalents()):
                m = r.mutant
                print(f"  survived {m.file}:{m.line} {m.description}: {m.code}")
        return 0
    if args.survivors_only:
        mutants = [m for m in mutants if earlier.get(_key(m)) == "survived"]
    if args.sample < 1.0:
        import random

        rng = random.Random(args.seed)
        keep = []
        for f in args.files:
            mine = [m for m in mutants if m.file == f]
            n = min(len(mine), max(1, round(args.sample * len(mine))))
            picked = set(rng.sample(range(len(mine)), n))
            # earlier survivors are always judged again
            keep += [m for k, m in enumerate(mine)
                     if k in picked or earlier.get(_key(m)) == "survived"]
        mutants = keep
    if args.limit:
        mutants = mutants[: args.limit]
    if args.list:
        for m in mutants:
            print(f"{m.file} #{m.index} line {m.line} {m.kind}: {m.description}")
        return 0
    _prepare()
    args.json.parent.mkdir(parents=True, exist_ok=True)
    chosen: dict[Mutant, list[str]] = {}
    everything: set[Mutant] = set()
    slowest = 0.0
    for suite in sorted({tuple(_tests_for(f)) for f in args.files}):
        files = [f for f in args.files if tuple(_tests_for(f)) == suite]
        t0 = time.monotonic()
        cov = args.json.parent / "coverage.json"
        coverage(files, list(suite), cov)
        data = json.loads(cov.read_text())
        hits = {k: {(f, n) for f, n in v} for k, v in data["hits"].items()}
        durations: dict[str, float] = data["durations"]
        every = sorted(durations, key=lambda t: (durations[t], t))
        print(f"coverage of {' '.join(suite)}: {time.monotonic() - t0:.1f} s, "
              f"{len(hits) - 1} tests", flush=True)
        slowest = max(slowest, baseline(list(suite)))
        for f in files:
            tree = ast.parse((ROOT / f).read_text(), filename=f)
            for m, lines in zip(mutants_of(f), _site_lines(tree), strict=True):
                sel = select_tests(m, lines, hits, durations)
                chosen[m] = every if sel is None else sel
                if sel is None:
                    everything.add(m)
    # the behaviour first (selected tests, fast); module and class bodies (every test) last
    if args.uncovered:
        missing = [m for m in mutants if m in chosen and not chosen[m]]
        for m in missing:
            print(f"  no test runs {m.file}:{m.line} {m.description}: {m.code}")
        print(f"{len(missing)} of {len(mutants)} mutants are on lines no test runs")
        return 0
    mutants = sorted((m for m in mutants if m in chosen),
                     key=lambda m: (m in everything, _priority(m.file), m.file, m.index))
    timeout_s = max(30.0, 5 * slowest)
    print(f"{len(mutants)} mutants in {len(args.files)} files, {args.jobs} jobs, "
          f"timeout {timeout_s:.0f} s (unmutated suite {slowest:.1f} s)", flush=True)
    started = time.monotonic()
    reused = [Result(m, "killed", 0.0) for m in mutants if earlier.get(_key(m)) == "killed"]
    mutants = [m for m in mutants if earlier.get(_key(m)) != "killed"]
    print(f"{len(reused)} killed in earlier runs, {len(mutants)} to judge", flush=True)
    results = reused + run(mutants, chosen, args.jobs, timeout_s,
                           args.json.with_suffix(".jsonl"))
    wall = time.monotonic() - started
    listed = _equivalents()
    per = report(results, listed)
    args.json.write_text(json.dumps(
        {"wall_seconds": wall, "per_file": per,
         "survivors": [asdict(r.mutant) for r in results
                       if r.status == "survived" and not _equivalent(r.mutant, listed)]},
        indent=1))
    _table(per)
    print(f"wall {wall:.0f} s, load average {os.getloadavg()[0]:.1f}")
    return 0


def _table(per: dict[str, dict[str, int]], population: dict[str, int] | None = None) -> None:
    """Score per file; with `population`, how many of the file's mutants were judged."""
    of = " of all" if population else ""
    print(f"\n| file | judged{of} | killed | equivalent | survived | score |")
    print("|---|---|---|---|---|---|")
    tot = {"mutants": 0, "killed": 0, "equivalent": 0, "survived": 0}
    for f in sorted(per):
        d = per[f]
        for k in tot:
            tot[k] += d[k]
        n = f"{d['mutants']} of {population[f]}" if population else f"{d['mutants']}"
        print(f"| {f} | {n} | {d['killed']} | {d['equivalent']} | {d['survived']} | "
              f"{_score(d):.1f} % |")
    core = {k: sum(d[k] for f, d in per.items() if f.startswith("core/")) for k in tot}
    n = (f"{core['mutants']} of {sum(v for f, v in population.items() if f.startswith('core/'))}"
         if population else f"{core['mutants']}")
    print(f"| **core/ total** | {n} | {core['killed']} | {core['equivalent']} | "
          f"{core['survived']} | **{_score(core):.1f} %** |")


def _key(m: Mutant) -> tuple[str, str, str, str, int]:
    """A mutant's identity across edits elsewhere in its file (line numbers move)."""
    return (m.file, m.kind, m.description, m.code, _occurrence(m))


_OCC: dict[Mutant, int] = {}


def _occurrence(m: Mutant) -> int:
    """Which occurrence of the same mutation of the same line text this is, in order."""
    if m not in _OCC:
        seen: Counter[tuple[str, str, str]] = Counter()
        for x in mutants_of(m.file):
            _OCC[x] = seen[(x.kind, x.description, x.code)]
            seen[(x.kind, x.description, x.code)] += 1
    return _OCC.get(m, 0)


def _earlier(paths: list[Path]) -> dict[tuple[str, str, str, str, int], str]:
    out: dict[tuple[str, str, str, str, int], str] = {}
    for p in paths:
        rows = [json.loads(line) for line in p.read_text().splitlines()]
        rows.sort(key=lambda r: (r["mutant"]["file"], r["mutant"]["index"]))
        seen: Counter[tuple[str, str, str, str]] = Counter()
        for r in rows:
            m = r["mutant"]
            base = (m["file"], m["kind"], m["description"], m["code"])
            now = mutants_of(m["file"])
            same = m["index"] < len(now) and (now[m["index"]].kind, now[m["index"]].description,
                                              now[m["index"]].code) == base[1:]
            # the file as it is now has this mutant at the same index: its occurrence there;
            # else (the file changed) count occurrences in the order they were judged
            key = (*base, _occurrence(now[m["index"]]) if same else seen[base])
            seen[base] += 1
            status = "survived" if r["status"] == "survived" else "killed"
            if out.get(key) != "killed":
                out[key] = status
    return out


def _score(d: dict[str, int]) -> float:
    """Killed over mutants that are not equivalent (mutmut's and Stryker's definition)."""
    judged = d["mutants"] - d["equivalent"]
    return 100.0 * d["killed"] / judged if judged else 100.0


if __name__ == "__main__":
    sys.exit(main())
