"""The live wire fuzzer (issue #16), short run: request frames recorded from real clients
(confluent-kafka, kafka-python, kcat) through a proxy in front of a running broker, mutated
(`harness.wirefuzz.mutate`) and sent to it, one at a time as a client does (so every frame
counted reached the broker). Afterwards the broker is the same process, answered Metadata
every 2 s throughout, still has every record acknowledged before the fuzz (CRC-checked
reads), produces and consumes with a real client, and its log holds no traceback. The
million-frame run is bench/wire_fuzz_bench.py."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from harness.wirefuzz import EXCLUDED_KEYS, api_key_of, corpus, live_session, mutate

from .conftest import _require_zookeeper

FRAMES = 3000
SECONDS = 60.0


def test_mutations_are_seeded_and_never_an_excluded_api() -> None:
    frame = struct.pack(">ihhih", 20, 3, 9, 7, 2) + b"me" + b"\x00" * 8
    for case in range(2000):
        a = mutate(random.Random(case), frame)
        assert a == mutate(random.Random(case), frame)  # reproducible from the seed
        assert api_key_of(a) not in EXCLUDED_KEYS
    gentle = mutate(random.Random(1), frame, gentle=True)
    assert gentle[:16] == frame[:16] and len(gentle) == len(frame) and gentle != frame


def test_the_corpus_leaves_out_what_would_change_the_checked_records() -> None:
    def req(key: int) -> bytes:
        return struct.pack(">ihhih", 12, key, 0, 1, 0) + b"\x00" * 4

    kept = corpus([req(k) for k in (0, 1, 3, 4, 7, 19, 20, 21, 33, 37, 44)] + [req(0)])
    assert sorted(api_key_of(f) for f in kept) == [0, 1, 3]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_live_fuzz_of_recorded_client_frames(tmp_path: Path) -> None:
    _require_zookeeper()
    rep = live_session(tmp_path, frames=FRAMES, seconds=SECONDS, seed=20261125)
    print(rep.as_dict())
    assert {"confluent-kafka", "kafka-python"} <= set(rep.clients), rep.clients
    # Produce, Fetch, ListOffsets, Metadata, OffsetCommit/Fetch, FindCoordinator, groups,
    # ApiVersions: the requests real clients send
    assert {0, 1, 2, 3, 8, 9, 10, 11, 12, 14, 18} <= set(rep.corpus_by_key), rep.corpus_by_key
    f = rep.fuzz
    assert f.frames >= min(FRAMES, 300), f.as_dict()  # bounded by SECONDS on a loaded machine
    assert f.responses > 0 and f.outcomes.get("closed", 0) > 0, f.as_dict()
    assert rep.acked_before >= 200 and rep.missing == 0, rep.as_dict()
    assert rep.pid_kept and rep.after_ok, rep.as_dict()
    assert rep.probes > 0 and rep.probe_failures == [], rep.probe_failures
    assert rep.tracebacks == [], rep.tracebacks[0]
