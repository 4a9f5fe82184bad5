"""A small EDN reader for Jepsen histories, and readers of Jepsen `history.edn` files and
Porcupine-style Jepsen logs into `Op`s (no external dependency).

EDN subset: maps `{}`, vectors `[]`, lists `()`, sets `#{}`, keywords (`:ok` -> `"ok"`; a
namespace is kept, `:a/b` -> `"a/b"`), symbols (as strings), `nil`, `true`/`false`,
integers (an `N` suffix allowed), floats (an `M` suffix allowed), ratios (as floats),
strings with escapes, characters (`\\a`, `\\newline`), comments (`;`), discards (`#_`), and
tagged literals (`#inst "..."`, `#jepsen.history.Op{...}`: the tag is dropped, the value
kept). Maps become dicts (keys as read: keywords as strings), sets frozensets when hashable.

`read_jepsen_history(path)`: every top-level map (or every map of a top-level vector/list)
is an op: `:index` (else its position), `:time` (ns), `:process`, `:type`, `:f`, `:value`;
other keys become `extra`. A map with `:key` (Porcupine's kv logs) gets `value = [key,
value]`. Register-like histories (read/write/cas) whose values are not `[key value]` tuples
(Knossos' single register) are keyed `None`, so the linearizability checker sees one key.

`read_porcupine_log(path)`: lines `INFO  jepsen.util - <process>\\t:<type>\\t:<f>\\t<value>`
(Porcupine's `test_data/jepsen/*.log`), one register (key `None`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any, Final

from harness.history import Op

_WS: Final = frozenset(" \t\r\n,")
_DELIMS: Final = frozenset(" \t\r\n,()[]{}\";")
_CHARS: Final = {"newline": "\n", "space": " ", "tab": "\t", "return": "\r",
                 "backspace": "\b", "formfeed": "\f"}
_ESC: Final = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "b": "\b", "f": "\f",
               "/": "/"}
_INT: Final = re.compile(r"^[+-]?\d+N?$")
_FLOAT: Final = re.compile(r"^[+-]?\d+(\.\d*)?([eE][+-]?\d+)?M?$")
_RATIO: Final = re.compile(r"^[+-]?\d+/\d+$")


class EdnError(ValueError):
    pass


class _Reader:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    def skip(self) -> None:
        s, n = self.s, len(self.s)
        while self.i < n:
            c = s[self.i]
            if c in _WS:
                self.i += 1
            elif c == ";":
                j = s.find("\n", self.i)
                self.i = n if j < 0 else j + 1
            elif s.startswith("#_", self.i):
                self.i += 2
                self.read()
            else:
                break

    def at_end(self) -> bool:
        self.skip()
        return self.i >= len(self.s)

    def read(self) -> Any:
        self.skip()
        s = self.s
        if self.i >= len(s):
            raise EdnError("unexpected end of input")
        c = s[self.i]
        if c == "[":
            self.i += 1
            return self._seq("]")
        if c == "(":
            self.i += 1
            return self._seq(")")
        if c == "{":
            self.i += 1
            items = self._seq("}")
            if len(items) % 2:
                raise EdnError("map with an odd number of forms")
            return {_hashable(items[j]): items[j + 1] for j in range(0, len(items), 2)}
        if c == "#":
            if s.startswith("#{", self.i):
                self.i += 2
                items = self._seq("}")
                try:
                    return frozenset(items)
                except TypeError:
                    return items
            # a tagged literal: drop the tag, keep the value
            self.i += 1
            self._token()
            return self.read()
        if c == '"':
            return self._string()
        if c == "\\":
            self.i += 1
            tok = self._token() or s[self.i: self.i + 1]
            if not tok:
                raise EdnError("bad character literal")
            if len(tok) == 1:
                return tok
            if tok in _CHARS:
                return _CHARS[tok]
            if tok.startswith("u") and len(tok) == 5:
                return chr(int(tok[1:], 16))
            return tok[0]
        if c in ")]}":
            raise EdnError(f"unexpected {c!r} at {self.i}")
        tok = self._token()
        if not tok:
            raise EdnError(f"unexpected {c!r} at {self.i}")
        return _atom(tok)

    def _seq(self, close: str) -> list[Any]:
        out: list[Any] = []
        while True:
            self.skip()
            if self.i >= len(self.s):
                raise EdnError(f"missing {close!r}")
            if self.s[self.i] == close:
                self.i += 1
                return out
            out.append(self.read())

    def _token(self) -> str:
        s, j = self.s, self.i
        while j < len(s) and s[j] not in _DELIMS:
            j += 1
        tok = s[self.i: j]
        self.i = j
        return tok

    def _string(self) -> str:
        s = self.s
        self.i += 1
        parts = []
        start = self.i
        while True:
            j = self.i
            if j >= len(s):
                raise EdnError("unterminated string")
            c = s[j]
            if c == '"':
                parts.append(s[start:j])
                self.i = j + 1
                return "".join(parts)
            if c == "\\":
                parts.append(s[start:j])
                e = s[j + 1: j + 2]
                if e == "u":
                    parts.append(chr(int(s[j + 2: j + 6], 16)))
                    self.i = j + 6
                else:
                    parts.append(_ESC.get(e, e))
                    self.i = j + 2
                start = self.i
                continue
            self.i = j + 1


def _hashable(x: Any) -> Any:
    if isinstance(x, list):
        return tuple(_hashable(v) for v in x)
    if isinstance(x, dict):
        return tuple(sorted((repr(k), _hashable(v)) for k, v in x.items()))
    return x


def _atom(tok: str) -> Any:
    if tok == "nil":
        return None
    if tok == "true":
        return True
    if tok == "false":
        return False
    if tok.startswith(":"):
        return tok[1:]
    if _INT.match(tok):
        return int(tok.rstrip("N"))
    if _FLOAT.match(tok):
        return float(tok.rstrip("M"))
    if _RATIO.match(tok):
        a, b = tok.split("/")
        return int(a) / int(b)
    if tok in ("##Inf", "##-Inf", "##NaN"):
        return float(tok[2:].replace("Inf", "inf").replace("NaN", "nan"))
    return tok


def loads(text: str) -> Any:
    """The first EDN form of `text`."""
    return _Reader(text).read()


def iter_forms(text: str) -> Iterator[Any]:
    """Every top-level EDN form of `text`."""
    r = _Reader(text)
    while not r.at_end():
        yield r.read()


# ---------------------------------------------------------------------------------------
# Jepsen histories

_REGISTER_FS: Final = frozenset({"read", "write", "cas"})
_BASE: Final = frozenset({"index", "time", "process", "type", "f", "value", "key"})


def _op_maps(text: str) -> Iterator[dict[Any, Any]]:
    for form in iter_forms(text):
        if isinstance(form, dict):
            yield form
        elif isinstance(form, list):
            for x in form:
                if isinstance(x, dict):
                    yield x


def _keyed(ops: list[Op]) -> list[Op]:
    """Single-register histories (values not [key value]) get key None."""
    reg = [op for op in ops if op.f in _REGISTER_FS]
    if not reg:
        return ops

    def pair(op: Op) -> bool:
        v = op.value
        if not isinstance(v, list) or len(v) != 2:
            return False
        return op.f != "cas" or isinstance(v[1], list)

    if all(pair(op) for op in reg):
        return ops
    return [op._replace(value=[None, op.value]) if op.f in _REGISTER_FS else op
            for op in ops]


def _to_op(m: dict[Any, Any], pos: int) -> Op:
    typ = m.get("type")
    f = m.get("f")
    if typ is None or f is None:
        raise EdnError(f"op {pos} lacks :type or :f")
    value = m.get("value")
    if "key" in m:
        value = [m["key"], value]
    proc = m.get("process")
    extra = {str(k): v for k, v in m.items() if k not in _BASE}
    return Op(int(m.get("index", pos)), int(m.get("time", pos)),
              proc if proc is not None else -1, str(typ), str(f), value, extra or None)


def read_jepsen_history(path: str | os.PathLike[str]) -> list[Op]:
    """The ops of a Jepsen `history.edn` (see the module docstring)."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    ops = [_to_op(m, i) for i, m in enumerate(_op_maps(text))]
    return _keyed(ops)


_LOG_LINE: Final = re.compile(
    r"jepsen\.util\s*-\s*(\S+)\s+:(\w+)\s+:([\w-]+)\s*(.*)$")


def read_porcupine_log(path: str | os.PathLike[str]) -> list[Op]:
    """The ops of a Porcupine-style Jepsen log (see the module docstring)."""
    ops: list[Op] = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            m = _LOG_LINE.search(line)
            if not m:
                continue
            proc_s, typ, f, rest = m.groups()
            proc: int | str = int(proc_s) if proc_s.lstrip("-").isdigit() else proc_s.lstrip(":")
            rest = rest.strip()
            try:
                value = loads(rest) if rest else None
            except EdnError:
                value = rest
            n = len(ops)
            ops.append(Op(n, n, proc, typ, f, value))
    return _keyed(ops)


def is_porcupine_log(path: str | os.PathLike[str]) -> bool:
    with open(path, encoding="utf-8", errors="replace") as fh:
        head = fh.read(4096)
    return bool(_LOG_LINE.search(head)) and not head.lstrip().startswith(("{", "["))


def read_any_history(path: str | os.PathLike[str]) -> list[Op]:
    """`.edn` (Jepsen), `.log`/`.txt` (Porcupine-style), else JSONL/Parquet by suffix."""
    from harness.history import read_history

    p = str(path)
    if p.endswith(".edn"):
        return read_jepsen_history(p)
    if p.endswith((".log", ".txt")) or (not p.endswith((".jsonl", ".parquet", ".json"))
                                        and is_porcupine_log(p)):
        return read_porcupine_log(p)
    return read_history(p)


__all__ = ["EdnError", "iter_forms", "loads", "read_any_history",
           "read_jepsen_history", "read_porcupine_log"]
