"""The queue generator: unique values, key -> topic-partition mapping, key rotation, the
key distribution, batch shapes, subscribe interleaving, crashes, and the stagger."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from typing import Any

import pytest

from harness.checkers.policy import QueuePolicy
from harness.clients.base import KeyMap, decode_long, encode_long
from harness.history import Op
from harness.workloads.queue import (
    QueueGen,
    QueueOpts,
    Stagger,
    key_dist_scale,
    op_max_offsets,
    rand_key_index,
    zipf,
)


def ops_of(gen: QueueGen, n: int) -> list[Any]:
    return [gen.next_op(now=0.0) for _ in range(n)]


def sends(ops: list[Any]) -> list[tuple[int, int]]:
    return [(m[1], m[2]) for op in ops if op.f in ("send", "txn")
            for m in op.value if m[0] == "send"]


# -- key map ------------------------------------------------------------------------------


def test_keymap_is_rq() -> None:
    km = KeyMap()
    # RQ: topic "t" + (k quot 2), partition k mod 2
    assert [km.tp(k) for k in range(5)] == [("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1),
                                            ("t2", 0)]
    for k in range(1000):
        assert km.key(*km.tp(k)) == k


@pytest.mark.parametrize(("prefix", "parts"), [("t", 1), ("q", 3), ("jepsen-", 7)])
def test_keymap_one_to_one(prefix: str, parts: int) -> None:
    km = KeyMap(prefix, parts)
    tps = [km.tp(k) for k in range(500)]
    assert len(set(tps)) == 500
    assert all(0 <= p < parts for _, p in tps)
    assert [km.key(t, p) for t, p in tps] == list(range(500))


def test_keymap_rejects_foreign_partitions() -> None:
    km = KeyMap()
    assert km.key("other", 0) is None
    assert km.key("t3", 2) is None
    assert km.key("tx", 0) is None
    assert km.topics([0, 1, 2, 5, 4]) == ["t0", "t1", "t2"]
    with pytest.raises(ValueError):
        km.topic(-1)
    with pytest.raises(ValueError):
        KeyMap("t1", 2)  # a prefix ending in a digit would be ambiguous


def test_long_serde() -> None:
    for v in (0, 1, -1, 2**63 - 1, -(2**63), 123456789):
        assert decode_long(encode_long(v)) == v
    assert encode_long(1) == b"\x00" * 7 + b"\x01"  # big-endian, as LongSerializer
    assert decode_long(None) is None
    assert decode_long(b"abc") == "0x616263"


# -- values -------------------------------------------------------------------------------


@pytest.mark.parametrize("max_len", [1, 4])
def test_values_unique_per_key_and_counters(max_len: int) -> None:
    opts = QueueOpts(seed=7, max_writes_per_key=20, max_txn_length=max_len)
    ops = ops_of(QueueGen(opts), 20_000)
    ss = sends(ops)
    assert len(ss) > 5000
    assert len(set(ss)) == len(ss), "a value was sent twice to a key"
    by_key: dict[int, list[int]] = {}
    for k, v in ss:
        by_key.setdefault(k, []).append(v)
    for vs in by_key.values():
        assert vs == list(range(1, len(vs) + 1))  # 1, 2, 3, ... per key


def test_key_rotation() -> None:
    opts = QueueOpts(seed=3, max_writes_per_key=8)
    gen = QueueGen(opts)
    ops = ops_of(gen, 5000)
    per_key = Counter(k for k, _ in sends(ops))
    assert gen.retired, "no key was retired"
    assert max(per_key.values()) <= 8  # quota = 1 + zipf(max) <= max
    assert len(gen.active) == opts.key_count and len(set(gen.active)) == opts.key_count
    # a retired key is never written again
    first_retired = gen.retired[0]
    retire_at = max(i for i, op in enumerate(ops) if op.f == "send"
                    and any(m[1] == first_retired for m in op.value))
    assert all(m[1] != first_retired for op in ops[retire_at + 1:] if op.f == "send"
               for m in op.value)
    # fresh keys are max(active) + 1: every key up to the largest was active once
    assert sorted(set(gen.retired) | set(gen.active)) == list(
        range(max(gen.active) + 1))


def test_exponential_key_distribution() -> None:
    rng = random.Random(1)
    scale = key_dist_scale(2, 10)
    c = Counter(rand_key_index(rng, "exponential", 2, scale, 10) for _ in range(100_000))
    assert set(c) <= set(range(10))
    # elle.txn/rand-key-i: slot i+1 is twice as likely as slot i ("key i in the current key
    # pool is k^i times more likely than the first key"; the reference's "half as likely"
    # reads the direction the other way round)
    for i in range(5, 9):
        assert 1.8 < c[i + 1] / c[i] < 2.2
    u = Counter(rand_key_index(rng, "uniform", 2, 0, 10) for _ in range(50_000))
    assert set(u) == set(range(10))


def test_zipf_range_and_skew() -> None:
    rng = random.Random(2)
    xs = [zipf(rng, 100) for _ in range(20_000)]
    assert min(xs) == 0 and max(xs) <= 99
    c = Counter(xs)
    assert c[0] > c[1] > c[3] > c[10]
    assert zipf(rng, 0) == 0 and zipf(rng, 1) == 0


# -- op shapes ----------------------------------------------------------------------------


def test_non_txn_default_is_single_mops() -> None:
    ops = ops_of(QueueGen(QueueOpts(seed=1)), 2000)
    qs = [op for op in ops if op.f in ("send", "poll", "txn")]
    assert {op.f for op in qs} == {"send", "poll"}
    assert all(len(op.value) == 1 for op in qs)
    assert all(op.value == [["poll"]] for op in qs if op.f == "poll")


def test_mixed_batches_poll_before_send() -> None:
    ops = ops_of(QueueGen(QueueOpts(seed=1, max_txn_length=4)), 3000)
    txns = [op for op in ops if op.f == "txn"]
    assert txns
    for op in txns:
        kinds = [m[0] for m in op.value]
        assert kinds == sorted(kinds, key=lambda f: f != "poll")  # polls first
        assert set(kinds) == {"poll", "send"}
    assert any(len(op.value) == 4 for op in ops if op.f in ("send", "poll", "txn"))


def test_sub_ops_inserted_before_their_op() -> None:
    opts = QueueOpts(seed=5, sub_p=0.25, sub_via=("assign", "subscribe"))
    ops = ops_of(QueueGen(opts), 4000)
    subs = [op for op in ops if op.f in ("assign", "subscribe")]
    assert {op.f for op in subs} == {"assign", "subscribe"}
    assert 0.15 < len(subs) / len(ops) < 0.35
    assert all(isinstance(op.value, list) and op.value for op in subs)


def test_poll_unseen_adds_unpolled_keys() -> None:
    opts = QueueOpts(seed=11, sub_p=1.0, key_count=2)
    gen = QueueGen(opts)
    gen.update(Op(1, 1, 0, "ok", "send", [["send", 77, [5, 1]]]))
    seen = [op.value for op in ops_of(gen, 300) if op.f == "assign"]
    assert any(77 in v for v in seen) and not all(77 in v for v in seen)
    # once polled up to the sent offset, 77 is no longer unseen
    gen.update(Op(2, 2, 0, "ok", "poll", [["poll", {77: [[5, 1]]}]]))
    assert not any(77 in op.value for op in ops_of(gen, 300) if op.f == "assign")


def test_crash_schedule() -> None:
    opts = QueueOpts(seed=1, crash_clients=True, crash_client_interval_s=3.0, concurrency=3)
    gen = QueueGen(opts)
    crashes = sum(gen.next_op(now=t / 100).f == "crash" for t in range(100 * 60))
    # about one per interval / concurrency = 1 s over 60 s
    assert 40 <= crashes <= 80


def test_max_offsets_tracking() -> None:
    gen = QueueGen(QueueOpts(seed=1))
    gen.update(Op(1, 1, 0, "ok", "send", [["send", 1, [3, 9]], ["send", 2, [None, 4]]]))
    gen.update(Op(2, 2, 0, "info", "send", [["send", 1, [7, 10]], ["send", 1, 11]]))
    gen.update(Op(3, 3, 0, "ok", "poll", [["poll", {2: [[0, 1], [5, 6]]}]]))
    gen.update(Op(4, 4, 0, "fail", "poll", [["poll", {4: [[9, 1]]}]]))
    assert gen.max_offsets() == {1: 7, 2: 5}
    assert op_max_offsets(Op(5, 5, 0, "ok", "txn", [["poll", {3: [[2, 1]]}],
                                                     ["send", 3, [4, 2]]])) == {3: 4}


def test_stagger_spacing() -> None:
    s = Stagger(0.01, random.Random(1))
    ts = [s.next_time(now=0.0) for _ in range(1000)]
    gaps = [b - a for a, b in itertools.pairwise(ts)]
    assert all(0 <= g < 0.02 for g in gaps)
    assert 0.008 < sum(gaps) / len(gaps) < 0.012
    # behind schedule: the next op goes now, no burst of catch-up
    assert s.next_time(now=100.0) == 100.0


def test_opts_validation_and_policy() -> None:
    with pytest.raises(ValueError):
        QueueOpts(txn=True)
    with pytest.raises(ValueError):
        QueueOpts(sub_via=("poll",))
    with pytest.raises(ValueError):
        QueueOpts(min_txn_length=3, max_txn_length=2)
    with pytest.raises(ValueError):
        QueueOpts(acks="1").client_settings("x")  # idempotence needs acks=all
    assert QueueOpts(acks="1", idempotence=False).client_settings("x").acks == "1"
    assert QueueOpts(sub_via=("assign", "subscribe")).policy() == QueuePolicy.of(
        ("assign", "subscribe"))
    s = QueueOpts(sub_via=("subscribe",)).client_settings("b:1")
    assert s.commit_on_poll and s.bootstrap == "b:1"
    assert not QueueOpts().client_settings("b:1").commit_on_poll
