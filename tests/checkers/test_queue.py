"""Queue checker on hand-made histories: one scenario per anomaly, incl. the tricky cases.

Scenarios follow jepsen.tests.kafka-test (same shapes and expected answers), written for
hiwater's JSON value encoding.
"""

from __future__ import annotations

import json
from typing import Any

from harness.checkers import queue
from harness.checkers.policy import QueuePolicy
from harness.history import Op


def o(index: int, process: Any, type_: str, f: str, value: Any, **extra: Any) -> Op:
    return Op(index, index, process, type_, f, value, extra or None)


def errs(ops: list[Op], name: str) -> list[dict[str, Any]] | None:
    return queue.analysis(ops).errors.get(name)


# --- version orders and inconsistent offsets ----------------------------------------------


def test_version_order_uses_info_sends_only_when_some_send_was_read() -> None:
    h = [
        # read a, b at offsets 0, 1
        o(0, 0, "invoke", "txn", [["poll"]]),
        o(1, 0, "ok", "txn", [["poll", {"x": [[0, "a"], [1, "b"]]}]]),
        # an info txn that wrote c@1, b@3, d@4; it committed, since b was read
        o(2, 1, "invoke", "txn", [["send", "x", "c"], ["send", "x", "b"], ["send", "x", "d"]]),
        o(3, 1, "info", "txn",
          [["send", "x", [1, "c"]], ["send", "x", [3, "b"]], ["send", "x", [4, "d"]]]),
    ]
    a = queue.analysis(h)
    ko = a.orders["x"]
    assert ko.offsets == [0, 1, 3, 4]
    # offset 1 holds b (first observed) and c
    assert ko.by_index == ["a", "b", "b", "d"]
    assert ko.conflicts == {1: ["b", "c"]}
    assert a.errors["inconsistent_offsets"] == [
        {"key": "x", "offset": 1, "index": 1, "values": ["b", "c"]}
    ]
    # b sits at offsets 1 and 3: a duplicate too
    assert a.errors["duplicate"] == [{"key": "x", "value": "b", "count": 2, "offsets": [1, 3]}]


def test_inconsistent_offsets_two_ok_sends_same_offset() -> None:
    h = [
        o(0, 379, "invoke", "send", [["send", 11, 641]]),
        o(1, 379, "ok", "send", [["send", 11, [537, 641]]]),
        o(2, 363, "invoke", "send", [["send", 11, 645]]),
        o(3, 363, "ok", "send", [["send", 11, [537, 645]]]),
    ]
    assert errs(h, "inconsistent_offsets") == [
        {"key": 11, "offset": 537, "index": 0, "values": [641, 645]}
    ]


def test_inconsistent_offsets_info_send_counts_only_once_proven_committed() -> None:
    send1 = o(0, 0, "invoke", "send", [["send", "x", 1], ["send", "y", 1]])
    send1c = o(1, 0, "info", "send", [["send", "x", [0, 1]], ["send", "y", 1]])
    send2 = o(2, 1, "invoke", "send", [["send", "x", 2]])
    send2c = o(3, 1, "ok", "send", [["send", "x", [0, 2]]])
    assert errs([send1, send1c, send2, send2c], "inconsistent_offsets") is None
    # a read of send1's y proves send1 committed: now offset 0 of x is inconsistent
    poll = o(4, 2, "invoke", "poll", [["poll"]])
    pollc = o(5, 2, "ok", "poll", [["poll", {"y": [[5, 1]]}]])
    assert errs([send1, send1c, send2, send2c, poll, pollc], "inconsistent_offsets") == [
        {"key": "x", "offset": 0, "index": 0, "values": [1, 2]}
    ]


# --- duplicates ------------------------------------------------------------------------------


def test_duplicate_basic() -> None:
    h = [
        o(0, 0, "invoke", "send", [["send", "x", "a"]]),
        o(1, 0, "ok", "send", [["send", "x", [1, "a"]]]),
        o(2, 1, "invoke", "send", [["send", "x", "b"]]),
        o(3, 1, "info", "send", [["send", "x", "b"]]),
        o(4, 2, "invoke", "poll", [["poll"]]),
        o(5, 2, "ok", "poll", [["poll", {"x": [[2, "b"], [3, "a"]]}]]),
    ]
    assert errs(h, "duplicate") == [{"key": "x", "value": "a", "count": 2, "offsets": [1, 3]}]


def test_inconsistent_offsets_with_duplicates_are_all_flagged() -> None:
    # Every value is sent at offset 0 and polled at offset 1: each one is a duplicate and
    # both offsets are inconsistent, however the version order picks its representatives.
    h: list[Op] = []
    for value in range(10):
        i = 4 * value
        h += [
            o(i, 0, "invoke", "send", [["send", "x", value]]),
            o(i + 1, 0, "ok", "send", [["send", "x", [0, value]]]),
            o(i + 2, 1, "invoke", "poll", [["poll"]]),
            o(i + 3, 1, "ok", "poll", [["poll", {"x": [[1, value]]}]]),
        ]
    a = queue.analysis(h)
    assert sorted(e["value"] for e in a.errors["duplicate"]) == list(range(10))
    assert all(e["offsets"] == [0, 1] for e in a.errors["duplicate"])
    assert a.errors["inconsistent_offsets"] == [
        {"key": "x", "offset": 0, "index": 0, "values": list(range(10))},
        {"key": "x", "offset": 1, "index": 1, "values": list(range(10))},
    ]
    # no lost writes: every value was read
    assert "lost_write" not in a.errors


def test_duplicate_seen_by_aborted_poll_but_not_failed_send() -> None:
    h = [
        o(0, 0, "invoke", "send", [["send", "x", 0]]),
        o(1, 0, "ok", "send", [["send", "x", [1, 0]]]),
        # a failed send got an offset: its write never happened, so it is not in VO
        o(2, 0, "invoke", "send", [["send", "x", 1]]),
        o(3, 0, "fail", "send", [["send", "x", [2, 1]]]),
        # an aborted poll still reports the true log: 0 at 11 is a duplicate
        o(4, 1, "invoke", "poll", [["poll"]]),
        o(5, 1, "fail", "poll", [["poll", {"x": [[11, 0], [12, 1]]}]]),
    ]
    assert errs(h, "duplicate") == [{"key": "x", "value": 0, "count": 2, "offsets": [1, 11]}]


# --- G1a and precommitted reads -----------------------------------------------------------


def test_g1a_read_of_failed_write() -> None:
    send = o(0, 0, "invoke", "send", [["send", "x", 2], ["send", "y", 3]])
    sendc = o(1, 0, "fail", "send", [["send", "x", 2], ["send", "y", 3]])
    poll = o(2, 1, "invoke", "poll", [["poll"]])
    pollc = o(3, 1, "ok", "poll", [["poll", {"x": [[0, 2]]}]])
    assert errs([send, sendc, poll, pollc], "G1a") == [
        {"key": "x", "value": 2, "writer": sendc, "reader": pollc}
    ]


def test_g1a_not_for_failed_poll_or_info_writer() -> None:
    h = [
        o(0, 0, "invoke", "send", [["send", "x", 2]]),
        o(1, 0, "fail", "send", [["send", "x", 2]]),
        o(2, 1, "invoke", "poll", [["poll"]]),
        o(3, 1, "fail", "poll", [["poll", {"x": [[0, 2]]}]]),  # aborted reader: fine
        o(4, 0, "invoke", "send", [["send", "y", 1]]),
        o(5, 0, "info", "send", [["send", "y", 1]]),
        o(6, 2, "invoke", "poll", [["poll"]]),
        o(7, 2, "ok", "poll", [["poll", {"y": [[0, 1]]}]]),  # info writer: fine
    ]
    assert errs(h, "G1a") is None


def test_precommitted_read() -> None:
    t1 = o(0, 0, "invoke", "txn", [["send", "x", "a"], ["poll"]])
    t1c = o(1, 0, "ok", "txn", [["send", "x", [0, "a"]], ["poll", {"x": [[0, "a"]]}]])
    assert errs([t1, t1c], "precommitted_read") == [{"op": t1c, "key": "x", "value": "a"}]


# --- lost writes ----------------------------------------------------------------------------


def test_lost_write_consistent() -> None:
    send_a = o(0, 0, "invoke", "send", [["send", "x", "a"]])
    send_ac = o(1, 0, "ok", "send", [["send", "x", [0, "a"]]])
    send_bd = o(2, 0, "invoke", "send", [["send", "x", "b"], ["send", "x", "d"]])
    send_bdc = o(3, 0, "ok", "send", [["send", "x", [1, "b"]], ["send", "x", [3, "d"]]])
    send_c = o(4, 1, "invoke", "send", [["send", "x", "c"]])
    send_cc = o(5, 1, "info", "send", [["send", "x", "c"]])
    poll = o(6, 0, "invoke", "poll", [["poll"]])
    pollc = o(7, 0, "ok", "poll", [["poll", {"x": [[2, "c"]]}]])
    h = [send_a, send_ac, send_bd, send_bdc, send_c, send_cc, poll, pollc]
    assert errs(h, "lost_write") == [
        {"key": "x", "value": "a", "index": 0, "max_read_index": 2, "writer": send_ac,
         "max_read": pollc},
        {"key": "x", "value": "b", "index": 1, "max_read_index": 2, "writer": send_bdc,
         "max_read": pollc},
    ]


def test_lost_write_under_inconsistent_offsets() -> None:
    # a is sent at 0, b overwrites offset 0, c lands at 2. Reading b and c means a should
    # have been read too, although the version order may pick b as offset 0's value.
    send_a = o(0, 0, "invoke", "send", [["send", "x", "a"]])
    send_ac = o(1, 0, "ok", "send", [["send", "x", [0, "a"]]])
    send_bc = o(2, 0, "invoke", "send", [["send", "x", "b"], ["send", "x", "c"]])
    send_bcc = o(3, 0, "ok", "send", [["send", "x", [0, "b"]], ["send", "x", [2, "c"]]])
    read = o(4, 0, "invoke", "poll", [["poll"]])
    readc = o(5, 0, "ok", "poll", [["poll", {"x": [[0, "b"], [2, "c"]]}]])
    h = [send_a, send_ac, send_bc, send_bcc, read, readc]
    assert errs(h, "lost_write") == [
        {"key": "x", "value": "a", "index": 0, "max_read_index": 1, "writer": send_ac,
         "max_read": readc}
    ]
    assert errs(h, "inconsistent_offsets") == [
        {"key": "x", "offset": 0, "index": 0, "values": ["a", "b"]}
    ]


def test_lost_write_indefinite_write_later_read() -> None:
    # An info send is a lost-write candidate only once one of its sends was read.
    send_ab = o(0, 0, "invoke", "send", [["send", "x", "a"], ["send", "y", "b"]])
    send_abc = o(1, 0, "info", "send", [["send", "x", "a"], ["send", "y", [0, "b"]]])
    send_c = o(2, 1, "invoke", "send", [["send", "y", "c"]])
    send_cc = o(3, 1, "info", "send", [["send", "y", "c"]])
    poll_a = o(4, 2, "invoke", "poll", [["poll"]])
    poll_ac = o(5, 2, "ok", "poll", [["poll", {"x": [[0, "a"]]}]])
    poll_c = o(6, 3, "invoke", "poll", [["poll"]])
    poll_cc = o(7, 3, "ok", "poll", [["poll", {"y": [[1, "c"]]}]])
    assert errs([send_ab, send_abc, send_c, send_cc, poll_c, poll_cc], "lost_write") is None
    assert errs(
        [send_ab, send_abc, send_c, send_cc, poll_a, poll_ac, poll_c, poll_cc], "lost_write"
    ) == [
        {"key": "y", "value": "b", "index": 0, "max_read_index": 1, "writer": send_abc,
         "max_read": poll_cc}
    ]


def test_no_lost_write_for_failed_writer_or_unread_tail() -> None:
    h = [
        o(0, 0, "invoke", "send", [["send", "x", 1], ["send", "x", 2], ["send", "x", 3]]),
        o(1, 0, "ok", "send", [["send", "x", [0, 1]], ["send", "x", [1, 2]],
                               ["send", "x", [2, 3]]]),
        o(2, 1, "invoke", "poll", [["poll"]]),
        o(3, 1, "ok", "poll", [["poll", {"x": [[0, 1], [1, 2]]}]]),  # 3 unread: not lost
    ]
    a = queue.analysis(h)
    assert "lost_write" not in a.errors
    assert a.errors["unseen"][0]["unseen"] == {"x": 1}


# --- poll skips and nonmonotonic polls ------------------------------------------------------

POLL_12 = o(0, 0, "invoke", "poll", [["poll"]])
POLL_12C = o(1, 0, "ok", "poll", [["poll", {"x": [[1, "a"], [2, "b"]]}]])
POLL_3 = o(2, 1, "invoke", "poll", [["poll"]])
POLL_3C = o(3, 1, "ok", "poll", [["poll", {"x": [[3, "c"]]}]])
POLL_4 = o(6, 0, "invoke", "poll", [["poll"]])
POLL_4C = o(7, 0, "ok", "poll", [["poll", {"x": [[4, "d"]]}]])
WRITE_6 = o(10, 2, "invoke", "send", [["send", "x", "f"]])
WRITE_6C = o(11, 2, "ok", "send", [["send", "x", [6, "f"]]])
POLL_7 = o(12, 0, "invoke", "poll", [["poll"]])
POLL_7C = o(13, 0, "ok", "poll", [["poll", {"x": [[7, "g"]]}]])
WRITE_ALL = o(14, 3, "invoke", "send", [["send", "x", v] for v in "abcdg"])
WRITE_ALLC = o(15, 3, "info", "send", [["send", "x", v] for v in "abcdg"])
SKIPS = [
    {"key": "x", "delta": 2, "skipped": ["c"], "ops": [POLL_12C, POLL_4C]},
    {"key": "x", "delta": 2, "skipped": ["f"], "ops": [POLL_4C, POLL_7C]},
]


def test_poll_skip() -> None:
    h = [POLL_12, POLL_12C, POLL_3, POLL_3C, POLL_4, POLL_4C, WRITE_6, WRITE_6C, POLL_7,
         POLL_7C, WRITE_ALL, WRITE_ALLC]
    assert errs(h, "poll_skip") == SKIPS


def test_poll_skip_forgiven_after_assign_or_subscribe_dropping_key() -> None:
    sub_y = o(4, 0, "invoke", "subscribe", ["y"])
    sub_yc = o(5, 0, "ok", "subscribe", ["y"])
    assign_y = o(8, 0, "invoke", "assign", ["y"])
    assign_yc = o(9, 0, "info", "assign", ["y"])
    h = [POLL_12, POLL_12C, POLL_3, POLL_3C, sub_y, sub_yc, POLL_4, POLL_4C, assign_y,
         assign_yc, WRITE_6, WRITE_6C, POLL_7, POLL_7C, WRITE_ALL, WRITE_ALLC]
    assert errs(h, "poll_skip") is None
    # assign/subscribe still covering x keep the position
    sub_xy = o(4, 0, "invoke", "subscribe", ["x", "y"])
    sub_xyc = o(5, 0, "ok", "subscribe", ["x", "y"])
    assign_xy = o(8, 0, "invoke", "assign", ["x", "y"])
    assign_xyc = o(9, 0, "ok", "assign", ["x", "y"])
    h = [POLL_12, POLL_12C, POLL_3, POLL_3C, sub_xy, sub_xyc, POLL_4, POLL_4C, assign_xy,
         assign_xyc, WRITE_6, WRITE_6C, POLL_7, POLL_7C, WRITE_ALL, WRITE_ALLC]
    assert errs(h, "poll_skip") == SKIPS
    # a failed assign changes nothing either
    assign_fail = o(9, 0, "fail", "assign", ["y"])
    h = [POLL_12, POLL_12C, POLL_3, POLL_3C, POLL_4, POLL_4C, assign_y, assign_fail,
         WRITE_6, WRITE_6C, POLL_7, POLL_7C, WRITE_ALL, WRITE_ALLC]
    assert errs(h, "poll_skip") == SKIPS


def _sends(n: int) -> list[Op]:
    return [
        o(0, 0, "invoke", "send", [["send", "x", i] for i in range(n)]),
        o(1, 0, "ok", "send", [["send", "x", [i, i]] for i in range(n)]),
    ]


def test_aborted_polls_must_rewind() -> None:
    good = [
        *_sends(3),
        o(2, 1, "invoke", "txn", [["poll"]]),
        o(3, 1, "ok", "txn", [["poll", {"x": [[0, 0]]}]]),
        o(4, 1, "invoke", "txn", [["poll"]]),
        o(5, 1, "fail", "txn", [["poll", {"x": [[1, 1], [2, 2]]}]]),
        o(6, 1, "invoke", "txn", [["poll"]]),
        o(7, 1, "info", "txn", [["poll", {"x": [[1, 1], [2, 2]]}]]),
        o(8, 1, "invoke", "txn", [["poll"]]),
        o(9, 1, "ok", "txn", [["poll", {"x": [[1, 1], [2, 2]]}]]),
    ]
    assert queue.analysis(good).errors == {}
    bad = [
        *_sends(6),
        o(2, 1, "invoke", "txn", [["poll"]]),
        o(3, 1, "ok", "txn", [["poll", {"x": [[0, 0]]}]]),
        o(4, 1, "invoke", "txn", [["poll"]]),
        o(5, 1, "fail", "txn", [["poll", {"x": [[1, 1], [2, 2]]}]]),
        o(6, 1, "invoke", "txn", [["poll"]]),
        o(7, 1, "fail", "txn", [["poll", {"x": [[3, 3], [4, 4]]}]]),
        o(8, 1, "invoke", "txn", [["poll"]]),
        o(9, 1, "ok", "txn", [["poll", {"x": [[5, 5]]}]]),
    ]
    assert errs(bad, "poll_skip") == [
        {"key": "x", "delta": 3, "skipped": [1, 2], "ops": [bad[3], bad[7]]},
        {"key": "x", "delta": 5, "skipped": [1, 2, 3, 4], "ops": [bad[3], bad[9]]},
    ]


def test_info_poll_can_be_a_poll_skip() -> None:
    h = [
        *_sends(6),
        o(2, 1, "invoke", "txn", [["poll"]]),
        o(3, 1, "ok", "txn", [["poll", {"x": [[0, 0]]}]]),
        o(6, 1, "invoke", "txn", [["poll"]]),
        o(7, 1, "info", "txn", [["poll", {"x": [[3, 3], [4, 4]]}]]),
    ]
    assert errs(h, "poll_skip") == [
        {"key": "x", "delta": 3, "skipped": [1, 2], "ops": [h[3], h[5]]}
    ]


def test_nonmonotonic_poll() -> None:
    send = o(0, 0, "invoke", "send", [["send", "x", v] for v in "abcd"])
    sendc = o(1, 0, "ok", "send", [["send", "x", v] for v in "abcd"])
    p123 = o(2, 0, "invoke", "poll", [["poll"]])
    p123c = o(3, 0, "ok", "poll", [["poll", {"x": [[1, "a"], [2, "b"], [3, "c"]]}]])
    p234 = o(6, 0, "invoke", "poll", [["poll"]])
    p234c = o(7, 0, "ok", "poll", [["poll", {"x": [[2, "b"], [3, "c"], [4, "d"]]}]])
    expected = [{"key": "x", "values": ["c", "b"], "delta": -1, "ops": [p123c, p234c]}]
    assert errs([send, sendc, p123, p123c, p234, p234c], "nonmonotonic_poll") == expected
    for f, keys, want in (
        ("subscribe", ["y"], None),
        ("assign", ["y"], None),
        ("subscribe", ["x", "y"], expected),
        ("assign", ["x", "y"], expected),
    ):
        sub = o(4, 0, "invoke", f, keys)
        subc = o(5, 0, "ok", f, keys)
        h = [send, sendc, p123, p123c, sub, subc, p234, p234c]
        assert errs(h, "nonmonotonic_poll") == want, (f, keys)


def test_rereading_last_value_is_nonmonotonic() -> None:
    h = [
        *_sends(2),
        o(2, 1, "invoke", "poll", [["poll"]]),
        o(3, 1, "ok", "poll", [["poll", {"x": [[0, 0], [1, 1]]}]]),
        o(4, 1, "invoke", "poll", [["poll"]]),
        o(5, 1, "ok", "poll", [["poll", {"x": [[1, 1]]}]]),
    ]
    assert errs(h, "nonmonotonic_poll") == [
        {"key": "x", "values": [1, 1], "delta": 0, "ops": [h[3], h[5]]}
    ]


def test_poll_positions_are_per_process() -> None:
    # two processes each read from the start: no error (each one is monotonic)
    h = [
        *_sends(3),
        o(2, 1, "invoke", "poll", [["poll"]]),
        o(3, 1, "ok", "poll", [["poll", {"x": [[0, 0], [1, 1], [2, 2]]}]]),
        o(4, 2, "invoke", "poll", [["poll"]]),
        o(5, 2, "ok", "poll", [["poll", {"x": [[0, 0], [1, 1], [2, 2]]}]]),
    ]
    assert queue.analysis(h).errors == {}


# --- internal poll checks -------------------------------------------------------------------


def test_int_poll_skip_within_and_across_poll_mops() -> None:
    send = o(0, 1, "invoke", "send", [["send", "x", v] for v in "abd"])
    sendc = o(1, 1, "info", "send", [["send", "x", v] for v in "abd"])
    pa = o(2, 0, "invoke", "poll", [["poll"]])
    pac = o(3, 0, "ok", "poll", [["poll", {"x": [[1, "a"], [4, "d"]]}]])
    pb = o(4, 0, "invoke", "poll", [["poll"], ["poll"]])
    pbc = o(5, 0, "ok", "poll", [["poll", {"x": [[1, "a"]]}], ["poll", {"x": [[4, "d"]]}]])
    p2 = o(6, 0, "invoke", "poll", [["poll"]])
    p2c = o(7, 0, "ok", "poll", [["poll", {"x": [[2, "b"]]}]])
    assert errs([send, sendc, pa, pac, pb, pbc, p2, p2c], "int_poll_skip") == [
        {"key": "x", "values": ["a", "d"], "delta": 2, "skipped": ["b"], "op": pac},
        {"key": "x", "values": ["a", "d"], "delta": 2, "skipped": ["b"], "op": pbc},
    ]


def test_int_poll_checks_skip_rebalanced_keys() -> None:
    send = o(0, 1, "invoke", "send", [["send", "x", v] for v in "abd"])
    sendc = o(1, 1, "info", "send", [["send", "x", v] for v in "abd"])
    pa = o(2, 0, "invoke", "poll", [["poll"]])
    pac = o(3, 0, "ok", "poll", [["poll", {"x": [[1, "a"], [4, "d"]]}]],
            rebalance_log=[{"type": "assigned", "keys": ["x"]}])
    p2 = o(6, 2, "invoke", "poll", [["poll"]])
    p2c = o(7, 2, "ok", "poll", [["poll", {"x": [[2, "b"]]}]])
    assert errs([send, sendc, pa, pac, p2, p2c], "int_poll_skip") is None


def test_int_nonmonotonic_poll() -> None:
    send = o(0, 0, "invoke", "send", [["send", "x", v] for v in "abc"])
    sendc = o(1, 0, "info", "send", [["send", "x", v] for v in "abc"])
    p31 = o(2, 0, "invoke", "poll", [["poll"]])
    p31c = o(3, 0, "ok", "poll", [["poll", {"x": [[3, "c"], [1, "a"]]}]])
    # b at 2 tells us there is an index between a and c: delta -2
    p33 = o(4, 0, "invoke", "poll", [["poll"]])
    p33c = o(5, 0, "ok", "poll",
             [["poll", {"x": [[2, "b"], [3, "c"]]}], ["poll", {"x": [[3, "c"]]}]])
    assert errs([send, sendc, p31, p31c, p33, p33c], "int_nonmonotonic_poll") == [
        {"key": "x", "values": ["c", "a"], "delta": -2, "op": p31c},
        {"key": "x", "values": ["c", "c"], "delta": 0, "op": p33c},
    ]


# --- sends -----------------------------------------------------------------------------------


def test_nonmonotonic_send() -> None:
    s34 = o(0, 0, "invoke", "send", [["send", "x", "c"], ["send", "x", "d"]])
    s34c = o(1, 0, "ok", "send", [["send", "x", [3, "c"]], ["send", "x", [4, "d"]]])
    s12 = o(10, 0, "invoke", "send", [["send", "x", "a"], ["send", "x", "b"]])
    s12c = o(11, 0, "ok", "send", [["send", "x", [1, "a"]], ["send", "x", [2, "b"]]])
    expected = [{"key": "x", "values": ["d", "a"], "delta": -3, "ops": [s34c, s12c]}]
    assert errs([s34, s34c, s12, s12c], "nonmonotonic_send") == expected
    for f, keys, typ, want in (
        ("subscribe", ["y"], "ok", None),
        ("assign", ["y"], "info", None),
        ("subscribe", ["x", "y"], "ok", expected),
        ("assign", ["x", "y"], "ok", expected),
    ):
        sub = o(2, 0, "invoke", f, keys)
        subc = o(3, 0, typ, f, keys)
        assert errs([s34, s34c, sub, subc, s12, s12c], "nonmonotonic_send") == want


def test_int_send_skip_inferred_from_a_poll() -> None:
    s13 = o(0, 0, "invoke", "send", [["send", "x", "a"], ["send", "x", "c"]])
    s13c = o(1, 0, "ok", "send", [["send", "x", [1, "a"]], ["send", "x", "c"]])
    sb = o(2, 1, "invoke", "send", [["send", "x", "b"]])
    sbc = o(3, 1, "info", "send", [["send", "x", "b"]])
    p23 = o(4, 2, "invoke", "poll", [["poll"]])
    p23c = o(5, 2, "ok", "poll", [["poll", {"x": [[2, "b"], [3, "c"]]}]])
    a = queue.analysis([s13, s13c, sb, sbc, p23, p23c])
    assert a.errors["int_send_skip"] == [
        {"key": "x", "values": ["a", "c"], "delta": 2, "skipped": ["b"], "op": s13c}
    ]
    # allowed by policy; the run is invalid only because a (at 1, below b and c) is lost
    res = queue.results(a)
    assert "int_send_skip" in res["anomaly_types"]
    assert res["bad_anomaly_types"] == ["lost_write", "unseen"]


def test_int_nonmonotonic_send() -> None:
    s31 = o(0, 0, "invoke", "send", [["send", "x", 3], ["send", "x", 1]])
    s31c = o(1, 0, "ok", "send", [["send", "x", [3, "c"]], ["send", "x", [1, "a"]]])
    s42 = o(2, 0, "invoke", "send", [["send", "y", "d"], ["send", "y", "b"]])
    s42c = o(3, 0, "info", "send", [["send", "y", "d"], ["send", "y", "b"]])
    s3 = o(4, 1, "invoke", "send", [["send", "y", "c"]])
    s3c = o(5, 1, "info", "send", [["send", "y", "c"]])
    p = o(6, 0, "invoke", "poll", [["poll"]])
    pc = o(7, 0, "ok", "poll", [["poll", {"y": [[2, "b"], [3, "c"], [4, "d"]]}]])
    assert errs([s31, s31c, s42, s42c, s3, s3c, p, pc], "int_nonmonotonic_send") == [
        {"key": "x", "values": ["c", "a"], "delta": -1, "op": s31c},
        {"key": "y", "values": ["d", "b"], "delta": -2, "op": s42c},
    ]


# --- unseen, realtime lag, empty history --------------------------------------------------


def test_unseen_series_and_final() -> None:
    h = [
        o(0, 0, "invoke", "poll", [["poll"]]),
        o(1, 0, "ok", "poll", [["poll", {}]]),
        o(2, 0, "invoke", "send", [["send", "x", "a"], ["send", "x", "b"]]),
        o(3, 0, "ok", "send", [["send", "x", [0, "a"]], ["send", "x", [1, "b"]]]),
        o(4, 0, "invoke", "poll", [["poll"]]),
        o(5, 0, "ok", "poll", [["poll", {"x": [[0, "a"]]}]]),
    ]
    a = queue.analysis(h)
    assert a.unseen_series == ([3, 5], ["x", "x"], [2, 1])
    assert a.errors["unseen"] == [{"time_ns": 5, "unseen": {"x": 1}, "messages": {"x": ["b"]}}]
    h += [o(6, 0, "invoke", "poll", [["poll"]]),
          o(7, 0, "ok", "poll", [["poll", {"x": [[1, "b"]]}]])]
    a = queue.analysis(h)
    assert a.unseen_series == ([3, 5, 7], ["x", "x", "x"], [2, 1, 0])
    assert "unseen" not in a.errors
    res = queue.results(a)
    assert res["valid?"] is True and res["bad_anomaly_types"] == []


def test_value_polled_before_its_send_is_acknowledged_is_not_unseen() -> None:
    h = [
        o(0, 0, "invoke", "send", [["send", "x", "a"]]),
        o(1, 1, "invoke", "poll", [["poll"]]),
        o(2, 1, "ok", "poll", [["poll", {"x": [[0, "a"]]}]]),
        o(3, 0, "ok", "send", [["send", "x", [0, "a"]]]),
    ]
    assert queue.analysis(h).errors == {}


def test_realtime_lag() -> None:
    h = [
        o(0, 0, "invoke", "assign", ["x"]),
        o(1, 0, "ok", "assign", ["x"]),
        o(2, 0, "invoke", "poll", [["poll"]]),
        o(3, 0, "ok", "poll", [["poll", {"x": []}]]),
        o(4, 0, "invoke", "send", [["send", "x", "a"]]),
        o(5, 0, "ok", "send", [["send", "x", [0, "a"]]]),
        o(6, 0, "invoke", "poll", [["poll"]]),
        o(7, 0, "ok", "poll", [["poll", {"x": []}]]),
        o(8, 1, "invoke", "send", [["send", "x", "c"], ["send", "x", "d"]]),
        o(9, 1, "ok", "send", [["send", "x", [2, "c"]], ["send", "x", [3, "d"]]]),
        o(10, 0, "invoke", "poll", [["poll"]]),
        o(11, 0, "ok", "poll", [["poll"]]),
        o(12, 0, "invoke", "poll", [["poll"]]),
        o(13, 0, "ok", "poll", [["poll", {"x": [[0, "a"], [1, "b"]]}]]),
        o(14, 0, "invoke", "assign", ["x", "y"]),
        o(15, 0, "ok", "assign", ["x", "y"]),
        o(16, 0, "invoke", "poll", [["poll"]]),
        o(17, 0, "ok", "poll", [["poll", {}]]),
        o(18, 0, "invoke", "assign", ["y"]),
        o(19, 0, "ok", "assign", ["y"]),
        o(20, 0, "invoke", "assign", ["x"]),
        o(21, 0, "ok", "assign", ["x"]),
        o(22, 0, "invoke", "poll", [["poll"]]),
        o(23, 0, "ok", "poll", [["poll", {}]]),
        o(24, 0, "invoke", "poll", [["poll"], ["poll"]]),
        o(25, 0, "ok", "poll", [["poll", {"x": [[0, "a"], [1, "b"]]}],
                                ["poll", {"x": [[2, "c"], [3, "d"]]}]]),
        o(26, 1, "invoke", "send", [["send", "x", "b"]]),
        o(27, 1, "info", "send", [["send", "x", "b"]]),
    ]
    a = queue.analysis(h)
    t, p, k, lag = a.lag_series
    assert list(zip(t, p, k, lag, strict=True)) == [
        (2, 0, "x", 0), (6, 0, "x", 1), (10, 0, "x", 5), (12, 0, "x", 3),
        (16, 0, "x", 7), (16, 0, "y", 0), (22, 0, "x", 17), (24, 0, "x", 0),
    ]
    assert a.worst_realtime_lag == {
        "time_ns": 22, "lag_ns": 17, "process": 0, "key": "x", "time": 22e-9, "lag": 17e-9
    }


def test_empty_history_is_invalid() -> None:
    h = [o(0, 0, "invoke", "assign", ["x"]), o(1, 0, "ok", "assign", ["x"])]
    res = queue.check(h)
    assert res["valid?"] is False
    assert res["bad_anomaly_types"] == ["empty_history"]


# --- results ------------------------------------------------------------------------------


def test_results_are_json_and_policy_dependent() -> None:
    h = [POLL_12, POLL_12C, POLL_3, POLL_3C, POLL_4, POLL_4C, WRITE_6, WRITE_6C, POLL_7,
         POLL_7C, WRITE_ALL, WRITE_ALLC]
    assign = queue.check(h, QueuePolicy.of(sub_via=["assign"]))
    assert assign["valid?"] is False
    assert "poll_skip" in assign["bad_anomaly_types"]
    sub = queue.check(h, QueuePolicy.of(sub_via=["assign", "subscribe"]))
    assert "poll_skip" in sub["anomaly_types"]
    assert "poll_skip" not in sub["bad_anomaly_types"]
    # JSON round trip; ops rendered as op dicts
    text = json.dumps(assign, sort_keys=True)
    back = json.loads(text)
    assert back["anomalies"]["poll_skip"]["count"] == 2
    assert back["anomalies"]["poll_skip"]["errs"][0]["ops"][0]["index"] == POLL_12C.index


def test_condense_keeps_the_worst_examples() -> None:
    es = [{"delta": d} for d in (5, 2, 9, 3, 7, 4, 8, 6, 10, 11)]
    c = queue.condense("poll_skip", es)
    assert c["count"] == 10
    assert sorted(e["delta"] for e in c["errs"]) == [4, 5, 6, 7, 8, 9, 10, 11]
    c = queue.condense("nonmonotonic_poll", [{"delta": d} for d in range(0, -12, -1)])
    assert [e["delta"] for e in c["errs"]] == [-11, -10, -9, -8, -7, -6, -5, -4]
    assert queue.condense("poll_skip", es, all_errors=True)["errs"] == es


def test_poll_results_as_pair_lists_are_accepted() -> None:
    h = [
        *_sends(3),
        o(2, 1, "invoke", "poll", [["poll"]]),
        o(3, 1, "ok", "poll", [["poll", [["x", [[0, 0], [2, 2]]]]]]),
    ]
    a = queue.analysis(h)
    assert a.errors["int_poll_skip"][0]["skipped"] == [1]
