"""Symmetry reduction over broker ids.

The model is symmetric under renaming brokers: the topic's assignment order only feeds
choices, and the model explores every option of every choice. So two worlds that differ by a
renaming have the same futures up to that renaming, and the checker keeps one of them.

The encoder turns a part of a world (a broker's node, ZooKeeper, the ghost, a message in
flight) into a nested tuple with every broker id passed through a permutation, and set-like
tuples (ISR, replica lists, live brokers) sorted after renaming. It walks every field of
every value, so no state component can be forgotten: a field is a broker id (by name), a set
of broker ids, or data encoded as it is. Each distinct encoding gets a small integer code
(interned, never reused), and `Canonicalizer.key` is the smallest flat tuple of codes over
the candidate permutations, which is the same for every world of an orbit.

Speed: a world has few distinct parts (thousands of node values for hundreds of thousands
of worlds), so codes are cached per part value and permutation, and encodings of sub-values
by object identity; a key costs a few dictionary lookups and hashes. Stored keys are tuples
of small ints: compact, and cheap to hash and compare. Broker states are interned (one
representative per value, found by identity), so a node is looked up by its state's
representative id instead of hashing the state whole; and the key itself is remembered per
tuple of part entries, so a successor whose parts were all met before (most of them: three
transitions in four lead to known states) costs a handful of identity lookups, without
choosing candidate permutations again.

No partial-order reduction. Reductions that leave states out (ample or stubborn sets)
would change the exact state counts the tests pin (a change to the model's semantics must
show there), and their soundness needs actions that commute and that no invariant observes;
here almost every action reads or writes ZooKeeper, another broker (an `rpc` fetch runs the
leader's and the follower's steps in one action; a delivered LeaderAndIsr starts fetching)
or the ghost the invariants read (exposed prefix, leaders per epoch, acknowledged records).
Sleep sets, which keep every state and only skip transitions between independent actions,
have the same obstacle: few enabled pairs are independent; and they change the transition
count, which the tests pin as exactly as the state count. Nor does skipping the actions of
brokers that an automorphism of the world swaps pay: 205 of the first 20,000 worlds expanded
at the issue's bounds have a non-trivial automorphism, 1.1% of the transitions.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import itertools
from collections.abc import Callable, Hashable
from typing import Any, cast

from core.messages import BatchInfo
from core.producer import BatchMetadata, ProducerEntry
from core.replica import PendingProduce
from core.rules.epochs import EpochEntry
from core.types import Errors, FetchState, Role, TopicPartition
from spec.world import Disk, Node, World

# Fields that hold one broker id.
_ID_FIELDS = frozenset({
    "broker_id", "controller_id", "leader", "replica_id", "src", "dst", "controller",
    "follower",  # core.timers.ReplicaLagTimer
})
# Fields that hold broker ids whose order carries no meaning in the model (every choice over
# them is explored), so they are sorted after renaming.
_SET_FIELDS = frozenset({
    "isr", "pending_isr", "replicas", "assignment", "candidates", "options", "shutting_down",
    "live", "registered", "live_brokers",
    "excluded",  # core.controller.PendingElection
    "restarted",  # core.controller.PartitionContext
    "registered_since",  # spec.world.Zk, core.events.PartitionSnapshot
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


class Canonicalizer:
    """Computes canonical keys for worlds of `n` brokers, with a bounded cache."""

    def __init__(self, n: int, cache_size: int = 600_000, fingerprints: bool = False,
                 symmetry: bool = True) -> None:
        """`fingerprints`: codes are 128-bit digests of the encodings' text instead of
        numbers in order of first appearance, and a key is one 128-bit digest of the
        smallest tuple; so independent processes agree on keys (the parallel search), at
        the price of a collision probability around states^2 / 2^128 (negligible).
        `symmetry=False`: the identity permutation only (a key per world, not per orbit)."""
        self.n = n
        self.fingerprints = fingerprints
        self.symmetry = symmetry
        self.perms = [tuple(p) for p in itertools.permutations(range(n))]
        self.perm_index = {p: k for k, p in enumerate(self.perms)}
        self.cache_size = cache_size
        self._cache: dict[int, tuple[object, list[Any]]] = {}
        self.invs: list[tuple[int, ...]] = []
        for p in self.perms:
            inv = [0] * n
            for old, new in enumerate(p):
                inv[new] = old
            self.invs.append(tuple(inv))
        self._codes: dict[Any, int] = {}  # encoding -> code; never cleared
        self._nodes: dict[Any, list[Any]] = {}
        self._zks: dict[Any, list[Any]] = {}
        self._ghosts: dict[Any, list[Any]] = {}
        self._msgs: dict[Any, list[Any]] = {}
        self._by_id: dict[int, tuple[object, list[Any]]] = {}
        # Broker states interned: equal states share one representative, found by identity
        # first (memoized core steps hand out shared states), so a node's table key names
        # its state by the representative's id instead of hashing the whole state again.
        self._states: dict[Any, Any] = {}
        self._state_ids: dict[int, tuple[object, int]] = {}
        # World -> key, by the identities of its parts' entries: most transitions lead to a
        # world whose parts were all met before (three in four successors are known states).
        self._keys: dict[tuple[int, ...], Hashable] = {}
        self._resets = 0
        self._plains: dict[int, tuple[object, Any]] = {}
        self._candidate_lists: dict[tuple[Any, ...], list[int]] = {}

    def _reset_parts(self) -> None:
        """Forget every part, entry and key at once: the key cache names entries by id and
        node entries name interned states by id, so neither may outlive what it names (an
        id may be reused once its object is freed). The value tables hold few values (a
        world has few distinct parts), so this is rare; the identity maps, which fill with
        every fresh object, are cleared on their own (`_entry`, `_state_id`)."""
        for table in (self._nodes, self._zks, self._ghosts, self._msgs, self._by_id,
                      self._states, self._state_ids, self._keys):
            table.clear()
        self._resets += 1

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
            if self.fingerprints and isinstance(x, enum.IntEnum):
                return int(x)  # see `_plain`
            return x
        cls = type(x)
        if cls in _ID_FREE:
            return self._plain(x) if self.fingerprints else x
        if _plan(cls) is not None:
            return self._encoded(x, k)
        if isinstance(x, tuple):
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
        fp = self.fingerprints
        for i, kind in plan:
            v = out[i + shift]
            if kind == _PLAIN:
                if v is not None and not isinstance(v, (int, str)):
                    out[i + shift] = self._enc(v, k)
                elif fp and isinstance(v, enum.IntEnum):
                    out[i + shift] = int(v)  # see `_plain`
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

    def _plain(self, x: Any) -> Any:
        """With fingerprints, a broker-id-free value as builtin data (tuples, ints, strings):
        codes are digests of an encoding's text, and the Python-level reprs of named tuples,
        dataclasses and enums cost more than the rest of the digest. Types are dropped, as
        equality of named tuples drops them: every position in a world holds one type.
        Cached by identity (held, so the id is not reused)."""
        hit = self._plains.get(id(x))
        if hit is not None and hit[0] is x:
            return hit[1]
        plain = _plain_value(x)
        if len(self._plains) >= self.cache_size:
            self._plains.clear()
        self._plains[id(x)] = (x, plain)
        return plain

    # -- canonical key -------------------------------------------------------------------

    def _entry(self, table: dict[Any, list[Any]], obj: object) -> list[Any]:
        """The cache entry of a world part: [id-free signature, then its code under each
        permutation (filled on demand)]. Found by identity first (successors share most
        parts with their parent, and memoized core steps return shared states), then by
        value, so equal parts built by different actions share one entry. A node is found
        by (its interned state's id, disk, timers, inbox): hashing a broker state whole
        is the expensive part."""
        hit = self._by_id.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        if len(self._by_id) >= self.cache_size:
            self._by_id.clear()  # entries stay in their tables: keys naming them stay valid
        if len(table) >= self.cache_size:
            self._reset_parts()
        lookup: Any = obj
        if table is self._nodes:
            node = cast(Node, obj)
            lookup = (self._state_id(node.state), node.disk, node.timers, node.inbox)
        entry = table.get(lookup)
        if entry is None:
            entry = table[lookup] = [None] * (len(self.perms) + 1)
            if table is self._nodes:
                entry[0] = hash(_node_signature(cast(Node, obj)))
        self._by_id[id(obj)] = (obj, entry)  # holds obj, so its id is not reused meanwhile
        return entry

    def _state_id(self, st: object) -> int:
        """The id of the interned representative of a broker state (0 for a crashed one)."""
        if st is None:
            return 0
        hit = self._state_ids.get(id(st))
        if hit is not None and hit[0] is st:
            return hit[1]
        if len(self._state_ids) >= self.cache_size:
            self._state_ids.clear()  # the representatives stay interned in `_states`
        if len(self._states) >= self.cache_size:
            self._reset_parts()
        rep = self._states.setdefault(st, st)
        sid = self._state_ids[id(st)] = (st, id(rep))  # holds st: its id is not reused
        return sid[1]

    def _code(self, entry: list[Any], obj: object, k: int) -> Any:
        """The small integer naming obj's encoding under permutation k. Codes are handed out
        in order of first appearance and never reused, so equal codes mean equal
        encodings. (With `fingerprints`, a digest of the encoding.)"""
        c = entry[k + 1]
        if c is None:
            enc = self._encoded(obj, k)
            if self.fingerprints:
                c = hashlib.blake2b(repr(enc).encode(), digest_size=16).digest()
            else:
                c = self._codes.get(enc)
                if c is None:
                    c = self._codes[enc] = len(self._codes)
            entry[k + 1] = c
        return c

    def _candidates(self, w: World, node_entries: list[list[Any]]) -> list[int]:
        """Permutations that sort brokers by an id-free signature; only brokers with equal
        signatures can be ordered more than one way."""
        n = self.n
        if not self.symmetry:
            return [0]  # the identity permutation comes first
        counts = [0] * n
        for m in w.network:
            if 0 <= m.dst < n:
                counts[m.dst] += 1
        c = w.zk.controller
        # the candidates are a function of the signatures (few values): remembered
        memo = (*[e[0] for e in node_entries], c, *counts)
        out = self._candidate_lists.get(memo)
        if out is None:
            if len(self._candidate_lists) >= 100_000:
                self._candidate_lists.clear()
            out = self._candidate_lists[memo] = self._candidates_of(node_entries, c, counts)
        return out

    def _candidates_of(self, node_entries: list[list[Any]], c: int,
                       counts: list[int]) -> list[int]:
        n = self.n
        sigs = [(node_entries[b][0], b == c, counts[b]) for b in range(n)]
        order = sorted(range(n), key=sigs.__getitem__)
        groups: list[list[int]] = []
        for b in order:
            if groups and sigs[groups[-1][0]] == sigs[b]:
                groups[-1].append(b)
            else:
                groups.append([b])
        if len(groups) == n:  # every broker looks different: one candidate
            p = [0] * n
            for new_id, old_id in enumerate(order):
                p[old_id] = new_id
            return [self.perm_index[tuple(p)]]
        out = []
        for arrangement in itertools.product(*(itertools.permutations(g) for g in groups)):
            flat = [b for g in arrangement for b in g]
            p = [0] * n
            for new_id, old_id in enumerate(flat):
                p[old_id] = new_id
            out.append(self.perm_index[tuple(p)])
        return out

    def key(self, w: World) -> Hashable:
        """The canonical key: per candidate permutation, the codes of the renamed brokers'
        nodes (in their new order), of ZooKeeper, of the ghost and of the sorted in-flight
        messages, as one flat tuple of ints (the number of brokers is fixed, so it parses
        one way); the smallest such tuple over the candidates. The same for every world of
        an orbit, and compact to store. Remembered per tuple of part entries (by id)."""
        resets = self._resets
        ident, entries = self._ident(w)
        found = self._keys.get(ident)
        if found is None:
            found = self._compute_key(w, *entries)
            if resets == self._resets:  # else some entries here are orphans: ids not stable
                self._keys[ident] = found
        return found

    def key_tidy(self, w: World, tidy: Callable[[World], World]) -> tuple[Hashable, World | None]:
        """`key(tidy(w))` for a world not tidied yet (`Model.successors_untidied`), and
        tidy(w) when it was computed: None when the key was known for w's parts, so the
        search tidies only the worlds it keeps. Sound because tidy is a function of the
        world's value (equal parts, equal tidy world) that leaves a tidy world as it is:
        the key remembered for an untidied world's parts is its tidy world's, and a world
        whose parts equal a tidy world's is that tidy world."""
        resets = self._resets
        ident, entries = self._ident(w)
        found = self._keys.get(ident)
        if found is not None:
            return found, None
        t = tidy(w)
        found = self._compute_key(w, *entries) if t is w else self.key(t)
        if resets == self._resets:
            self._keys[ident] = found
        return found, t

    def _ident(self, w: World) -> tuple[tuple[int, ...], tuple[
            list[list[Any]], list[Any], list[Any], list[list[Any]]]]:
        """The identities of w's part entries (the key cache's index), and the entries."""
        if len(self._keys) >= 2 * self.cache_size:
            self._keys.clear()  # the entries it names stay alive in their tables
        entry, by_id = self._entry, self._by_id
        node_entries = []
        for x in w.nodes:  # the identity lookup of `_entry`, inline: most parts are shared
            hit = by_id.get(id(x))
            node_entries.append(hit[1] if hit is not None and hit[0] is x
                                else entry(self._nodes, x))
        zk = w.zk
        hit = by_id.get(id(zk))
        zk_entry = hit[1] if hit is not None and hit[0] is zk else entry(self._zks, zk)
        ghost = w.ghost
        hit = by_id.get(id(ghost))
        ghost_entry = (hit[1] if hit is not None and hit[0] is ghost
                       else entry(self._ghosts, ghost))
        msg_entries = []
        for m in w.network:
            hit = by_id.get(id(m))
            msg_entries.append(hit[1] if hit is not None and hit[0] is m
                               else entry(self._msgs, m))
        ident = tuple(map(id, [*node_entries, zk_entry, ghost_entry, *msg_entries]))
        return ident, (node_entries, zk_entry, ghost_entry, msg_entries)

    def _compute_key(self, w: World, node_entries: list[list[Any]], zk_entry: list[Any],
                     ghost_entry: list[Any], msg_entries: list[list[Any]]) -> Hashable:
        nodes, zk, ghost, network = w.nodes, w.zk, w.ghost, w.network
        code = self._code
        best: tuple[Any, ...] | None = None
        for k in self._candidates(w, node_entries):
            k1 = k + 1
            enc = []
            for old in self.invs[k]:
                e = node_entries[old]
                c = e[k1]
                enc.append(code(e, nodes[old], k) if c is None else c)
            c = zk_entry[k1]
            enc.append(code(zk_entry, zk, k) if c is None else c)
            c = ghost_entry[k1]
            enc.append(code(ghost_entry, ghost, k) if c is None else c)
            if msg_entries:
                enc += sorted([code(e, m, k) if e[k1] is None else e[k1]
                               for e, m in zip(msg_entries, network, strict=True)])
            t = tuple(enc)
            if best is None or t < best:
                best = t
        assert best is not None
        if self.fingerprints:
            return int.from_bytes(hashlib.blake2b(b"".join(best), digest_size=16).digest())
        return best


def _plain_value(x: Any) -> Any:
    if isinstance(x, enum.IntEnum):  # every enum in a world is an IntEnum
        return int(x)
    if isinstance(x, (int, str)) or x is None:
        return x
    if isinstance(x, tuple):
        return tuple([_plain_value(v) for v in x])
    if dataclasses.is_dataclass(x):
        return (type(x).__name__, *[_plain_value(getattr(x, f.name))
                                    for f in dataclasses.fields(x)])
    return x


def _node_signature(n: Node) -> Any:
    """What a broker's node looks like without naming any broker."""
    s = n.state
    reps: Any = ()
    if s is not None:
        b = s.broker_id
        reps = tuple((r.role, r.leader_epoch, r.log_end_offset, r.high_watermark, len(r.isr),
                      r.fetch_state, r.leader == b) for r in s.replicas)
    return (s is not None, n.disk, reps, len(n.inbox), len(n.timers))


def canonical_key(w: World, n_brokers: int) -> Any:
    """One-off canonical key (the checker keeps a `Canonicalizer` for its cache)."""
    return Canonicalizer(n_brokers).key(w)
