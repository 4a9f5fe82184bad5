"""Symmetry reduction over broker ids.

The model is symmetric under renaming brokers: the topic's assignment order only feeds
choices, and the model explores every option of every choice. So two worlds that differ by a
renaming have the same futures up to that renaming, and the checker keeps one of them.

`canonical_key` encodes a world as a nested tuple with every broker id passed through a
permutation, and set-like tuples (ISR, replica lists, live brokers) sorted after renaming;
the key is the encoding whose hash is smallest over all permutations (ties broken by the
encodings' text), which is the same for every world of an orbit. The encoder walks every
field of every value, so no state component can be forgotten: a field is a broker id (by
name), a set of broker ids, or data encoded as it is. Encodings of the parts of a world are
cached by object identity: a successor shares most of its parts with its parent.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

from core.messages import BatchInfo
from core.producer import BatchMetadata, ProducerEntry
from core.replica import PendingProduce
from core.rules.epochs import EpochEntry
from core.types import Errors, FetchState, Role, TopicPartition
from spec.world import Disk, World

# Fields that hold one broker id.
_ID_FIELDS = frozenset({
    "broker_id", "controller_id", "leader", "replica_id", "src", "dst", "controller",
})
# Fields that hold broker ids whose order carries no meaning in the model (every choice over
# them is explored), so they are sorted after renaming.
_SET_FIELDS = frozenset({
    "isr", "pending_isr", "replicas", "assignment", "candidates", "options", "shutting_down",
    "live", "registered", "live_brokers",
})
_SKIP_FIELDS = frozenset({"config"})  # constant across a run

_PLAIN, _ID, _SET, _FOLLOWERS, _PER_BROKER, _LEADERS = range(6)
_SPECIAL = {"followers": _FOLLOWERS, "registrations": _PER_BROKER, "leaders": _LEADERS}

_plans: dict[type, tuple[tuple[int, int], ...] | None] = {}

# Types that never hold a broker id: encoded as themselves.
_ID_FREE: frozenset[type] = frozenset({
    TopicPartition, EpochEntry, Disk, PendingProduce, ProducerEntry, BatchMetadata, BatchInfo,
    Role, FetchState, Errors,
})


def _sorted(values: list[Any]) -> tuple[Any, ...]:
    try:
        return tuple(sorted(values))
    except TypeError:  # None next to a value: order by text instead
        return tuple(sorted(values, key=repr))


def _plan(cls: type) -> tuple[tuple[int, int], ...] | None:
    """(field index, kind) for a NamedTuple or dataclass type; None for other types."""
    if cls in _plans:
        return _plans[cls]
    names: tuple[str, ...] | None = None
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        names = cls._fields
    elif dataclasses.is_dataclass(cls):
        names = tuple(f.name for f in dataclasses.fields(cls))
    plan = None
    if names is not None:
        plan = tuple(
            (i, _SPECIAL.get(n, _ID if n in _ID_FIELDS else _SET if n in _SET_FIELDS else _PLAIN))
            for i, n in enumerate(names)
            if n not in _SKIP_FIELDS
        )
    _plans[cls] = plan
    return plan


class Key:
    """A canonical encoding with its hash computed once (tuples do not cache theirs)."""

    __slots__ = ("encoding", "hash")

    def __init__(self, encoding: Any, h: int) -> None:
        self.encoding = encoding
        self.hash = h

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Key) and self.hash == other.hash and (
            self.encoding == other.encoding)


class Canonicalizer:
    """Computes canonical keys for worlds of `n` brokers, with a bounded cache."""

    def __init__(self, n: int, cache_size: int = 600_000) -> None:
        self.n = n
        self.perms = [tuple(p) for p in itertools.permutations(range(n))]
        self.perm_index = {p: k for k, p in enumerate(self.perms)}
        self.cache_size = cache_size
        self._cache: dict[int, tuple[object, list[Any]]] = {}

    # -- encoding ----------------------------------------------------------------------

    def _encoded(self, obj: object, k: int) -> Any:
        """The encoding of a record-like value under permutation k, cached by identity
        (the cache holds the object, so its id cannot be reused while cached)."""
        entry = self._cache.get(id(obj))
        if entry is None or entry[0] is not obj:
            if len(self._cache) >= self.cache_size:
                self._cache.clear()
            entry = (obj, [None] * len(self.perms))
            self._cache[id(obj)] = entry
        encs = entry[1]
        enc = encs[k]
        if enc is None:
            enc = encs[k] = self._enc_record(obj, k)
        return enc

    def _enc(self, x: Any, k: int) -> Any:
        if x is None or isinstance(x, (int, str)):
            return x
        cls = type(x)
        if cls in _ID_FREE:
            return x
        if _plan(cls) is not None:
            return self._encoded(x, k)
        if isinstance(x, tuple):
            if x and x[0] == "lag":  # a lag timer key: ("lag", tp, follower)
                return ("lag", x[1], self.perms[k][x[2]])
            return tuple([self._enc(v, k) for v in x])
        if isinstance(x, frozenset):
            return _sorted([self._enc(v, k) for v in x])
        return x

    def _enc_record(self, x: Any, k: int) -> Any:
        """A NamedTuple becomes a plain tuple of its (encoded) fields: in a world every
        position holds one type, so the class need not be named. A dataclass (events and
        messages, where types mix) is prefixed with its class name."""
        cls = type(x)
        plan = _plan(cls)
        assert plan is not None
        p = self.perms[k]
        if isinstance(x, tuple):
            out: list[Any] = list(x)
        else:
            out = [cls.__name__, *(getattr(x, f.name) for f in dataclasses.fields(x))]
        shift = 0 if isinstance(x, tuple) else 1
        for i, kind in plan:
            v = out[i + shift]
            if kind == _PLAIN:
                if v is not None and not isinstance(v, (int, str)):
                    out[i + shift] = self._enc(v, k)
            elif kind == _ID:
                if isinstance(v, int):
                    out[i + shift] = p[v] if v >= 0 else v
                else:
                    out[i + shift] = self._enc(v, k)
            elif kind == _SET:
                if isinstance(v, tuple):
                    out[i + shift] = _sorted([p[j] if isinstance(j, int) else self._enc(j, k)
                                              for j in v])
                else:
                    out[i + shift] = self._enc(v, k)
            elif kind == _FOLLOWERS:
                out[i + shift] = tuple(sorted([(p[b], -1 if leo is None else leo)
                                               for b, leo in v]))
            elif kind == _PER_BROKER:
                moved = [0] * len(v)
                for b, c in enumerate(v):
                    moved[p[b]] = c
                out[i + shift] = tuple(moved)
            else:  # _LEADERS: (epoch, broker) pairs
                out[i + shift] = tuple(sorted([(e, p[b]) for e, b in v]))
        return tuple(out)

    # -- canonical key -------------------------------------------------------------------

    def _candidates(self, w: World) -> list[int]:
        """Permutations that sort brokers by an id-free signature; only brokers with equal
        signatures can be ordered more than one way."""
        sigs = [hash(_signature(w, b)) for b in range(self.n)]
        order = sorted(range(self.n), key=lambda b: sigs[b])
        groups: list[list[int]] = []
        for b in order:
            if groups and sigs[groups[-1][0]] == sigs[b]:
                groups[-1].append(b)
            else:
                groups.append([b])
        out = []
        for arrangement in itertools.product(*(itertools.permutations(g) for g in groups)):
            flat = [b for g in arrangement for b in g]
            p = [0] * self.n
            for new_id, old_id in enumerate(flat):
                p[old_id] = new_id
            out.append(self.perm_index[tuple(p)])
        return out

    def key(self, w: World) -> Key:
        best: Any = None
        best_hash = 0
        for k in self._candidates(w):
            p = self.perms[k]
            inv = [0] * self.n
            for old, new in enumerate(p):
                inv[new] = old
            nodes = tuple([self._encoded(w.nodes[old], k) for old in inv])
            net = _sorted([self._encoded(m, k) for m in w.network])
            enc = (nodes, self._encoded(w.zk, k), net, self._encoded(w.ghost, k))
            h = hash(enc)
            if best is None or h < best_hash or (h == best_hash and enc != best
                                                  and repr(enc) < repr(best)):
                best, best_hash = enc, h
        return Key(best, best_hash)


def _signature(w: World, b: int) -> Any:
    """What broker b looks like without naming any broker."""
    n = w.nodes[b]
    s = n.state
    reps: Any = ()
    if s is not None:
        reps = tuple((r.role, r.leader_epoch, r.log_end_offset, r.high_watermark, len(r.isr),
                      r.fetch_state, r.leader == b) for r in s.replicas)
    return (s is not None, n.disk, reps, len(n.inbox), len(n.timers), b == w.zk.controller,
            sum(1 for m in w.network if m.dst == b))


def canonical_key(w: World, n_brokers: int) -> Any:
    """One-off canonical key (the checker keeps a `Canonicalizer` for its cache)."""
    return Canonicalizer(n_brokers).key(w)
