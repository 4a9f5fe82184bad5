"""Real clients against a real 3-broker cluster (RF 3, min.insync.replicas 2).

kafka-python, aiokafka, confluent-kafka and kcat each: create topics (admin clients; kcat
through auto-creation), produce with acks 0 / 1 / all and idempotence, produce with every
codec (and the broker must store each batch with that codec on every replica, and every
client must read every other client's compressed batches), consume everything back in order
per partition, and commit and resume in a consumer group. Then kafka-python, aiokafka and
confluent consumers share one group on a 3-partition topic.

The adapters are in clients_lib.py; every loop there is bounded by a count and a deadline and
kcat runs under a subprocess timeout. The only addresses used are the cluster's 127.0.0.x.

Only the kcat parts need kcat (the Debian package `kcat`): without it they skip, except under
CI (env CI set), where that is a failure, as a missing ZooKeeper is (tests/broker/conftest.py).
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from broker.runtime.cluster import LocalCluster

from .clients_lib import (
    ADMIN_CLIENTS,
    CLIENTS,
    CODECS,
    KCAT,
    Member,
    ProduceSpec,
    Rec,
    check_read,
    committed_offsets,
    counts,
    create_topic,
    group_consume,
    kcat,
    make_records,
    produce,
    read,
    stored_batches,
    topic_layout,
    wait_hw,
    wait_topic,
)

TOPIC_ALREADY_EXISTS = 36


def require_kcat() -> None:
    """Skip without kcat; under CI a missing kcat fails the test instead."""
    if KCAT is None:
        why = "kcat (Debian package `kcat`) is not installed: apt-get install kcat"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


def requires(client: str) -> None:
    if client == "kcat":
        require_kcat()


def installed(clients: tuple[str, ...]) -> tuple[str, ...]:
    """The clients that can run here (kcat only when installed)."""
    return tuple(c for c in clients if c != "kcat" or KCAT is not None)


def slug(client: str) -> str:
    return client.replace("-", "")


def fail_with_logs(cluster: LocalCluster, what: str) -> None:
    tails = "\n".join(f"--- broker {i} ---\n{cluster.log_tail(i, 15)}" for i in cluster.nodes)
    pytest.fail(f"{what}\n{tails}")


# -- topics ---------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("client", ADMIN_CLIENTS)
def test_admin_creates_topic(cluster: LocalCluster, client: str) -> None:
    topic = f"created-{slug(client)}"
    code = create_topic(client, cluster.bootstrap, topic, partitions=3, rf=3,
                        configs={"retention.ms": "3600000"})
    assert code == 0, f"{client} CreateTopics: error {code}"
    # Straight after CreateTopics, Metadata on any broker shows the whole topic or none of it:
    # librdkafka fails sends to partitions missing from its first view with UNKNOWN_PARTITION
    # (the broker once published new partitions one by one; see Broker.topic_complete).
    early = make_records(f"{topic}-early", 3, 2)
    produce("confluent", cluster.bootstrap, topic, early, ProduceSpec("all"))
    layout = wait_topic(cluster, topic, 3)
    for p, r in layout.items():
        assert sorted(r["replicas"]) == [1, 2, 3], (p, r)
        assert sorted(r["isr"]) == [1, 2, 3], (p, r)
    # leaders spread over the brokers, as Kafka's assignment does
    assert len({r["leader"] for r in layout.values()}) == 3, layout
    # a second create of the same name is TOPIC_ALREADY_EXISTS, and nothing changes
    assert create_topic(client, cluster.bootstrap, topic, 3, 3) == TOPIC_ALREADY_EXISTS
    assert sorted(topic_layout(cluster, topic)) == [0, 1, 2]
    # the topic is usable through the same client
    recs = make_records(topic, 3, 4)
    produce(client, cluster.bootstrap, topic, recs, ProduceSpec("all"))
    check_read(read(client, cluster.bootstrap, topic, counts(early + recs)), early + recs, client)


@pytest.mark.timeout(120)
def test_kcat_auto_creates_topic(cluster: LocalCluster) -> None:
    """kcat has no admin API: producing to a missing topic auto-creates it (num.partitions 1,
    default.replication.factor 3), and the records are there."""
    require_kcat()
    topic = "auto-kcat"
    assert topic not in {r["topic"] for r in cluster.replica_states(1)["replicas"]}
    recs = make_records(topic, 1, 10)
    produce("kcat", cluster.bootstrap, topic, recs, ProduceSpec("all"))
    layout = wait_topic(cluster, topic, 1)
    assert sorted(layout[0]["replicas"]) == [1, 2, 3]
    check_read(read("kcat", cluster.bootstrap, topic, counts(recs)), recs, "kcat")
    # and `kcat -L` lists it
    r = kcat(["-L", "-b", cluster.bootstrap, "-t", topic], timeout_s=20)
    assert r.returncode == 0, r.stderr
    assert f'topic "{topic}" with 1 partitions' in r.stdout.decode(), r.stdout


# -- produce with acks and idempotence, read back in order ----------------------------------------

MODES = {
    "acks0": ProduceSpec("0"),
    "acks1": ProduceSpec("1"),
    "acksall": ProduceSpec("all"),
    "idempotent": ProduceSpec("all", idempotent=True),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("client", CLIENTS)
def test_produce_acks_and_idempotence(cluster: LocalCluster, client: str) -> None:
    requires(client)
    topic = f"acks-{slug(client)}"
    assert create_topic("confluent", cluster.bootstrap, topic, 3, 3) == 0
    wait_topic(cluster, topic, 3)
    all_recs: list[Rec] = []
    for mode, spec in MODES.items():
        recs = make_records(f"{client}-{mode}", 3, 15)
        produce(client, cluster.bootstrap, topic, recs, spec)
        all_recs += recs
    # acks=0 and acks=1 records are readable once the ISR has them; wait for all of them so
    # that a loss shows as a missing record rather than a slow read
    wait_hw(cluster, topic, counts(all_recs))
    got = read(client, cluster.bootstrap, topic, counts(all_recs))
    check_read(got, all_recs, client)
    # the idempotent batches carry a producer id and sequences from 0 on every partition;
    # the others carry none
    leader_dirs = {p: cluster.nodes[r["leader"]].data_dir
                   for p, r in topic_layout(cluster, topic).items()}
    per_mode = 15
    for p, d in leader_dirs.items():
        batches = stored_batches(d, topic, p)
        idem = [b for b in batches if b.base_offset >= 3 * per_mode]
        plain = [b for b in batches if b.base_offset < 3 * per_mode]
        assert idem and all(b.producer_id >= 0 for b in idem), (p, idem)
        assert idem[0].base_sequence == 0, (p, idem)
        assert len({b.producer_id for b in idem}) == 1, (p, idem)
        assert all(b.producer_id == -1 for b in plain), (p, plain)


@pytest.mark.timeout(120)
def test_acks_all_latency_is_not_a_fetch_wait(cluster: LocalCluster) -> None:
    """An acks=all produce waits for the followers' next fetches, which the leader answers as
    soon as the data is appended; it must not wait out a replica.fetch.wait.max.ms (500 ms)
    long poll. It did, every time, while a follower's fetch rounds to one leader were split
    into two alternating sets (fixed in broker/runtime/peers.py, Fetcher._run). The minimum
    of several sends is compared, so a loaded machine's slow outliers do not matter."""
    from confluent_kafka import Producer

    topic = "latency"
    # two topics one after the other: the second one's partitions join the followers' fetch
    # rounds while rounds for the first are in flight (what split them, before the fix)
    for t in (topic, f"{topic}-other"):
        assert create_topic("confluent", cluster.bootstrap, t, 3, 3) == 0
        wait_topic(cluster, t, 3)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0})
    p.produce(topic, b"warm-up", partition=0)
    assert p.flush(30) == 0
    took = []
    for i in range(8):
        time.sleep(0.2)  # let the followers' fetches park on the leader again
        t0 = time.monotonic()
        p.produce(topic, f"v{i}".encode(), partition=i % 3)
        assert p.flush(30) == 0
        took.append(round(time.monotonic() - t0, 3))
    del p  # destroy the client now, not after the cluster has stopped
    assert min(took) < 0.4, f"acks=all round trips {took} s: bound to the fetch wait"


# -- compression: stored verbatim, readable by every client ---------------------------------------

CODEC_RECORDS = 20  # per codec; padded so that librdkafka's "compress only if smaller" compresses


def codec_topic(client: str) -> str:
    return f"codecs-{slug(client)}"


@pytest.fixture(scope="module")
def codec_topics(cluster: LocalCluster) -> dict[str, list[Rec]]:
    """Per producing client one single-partition topic holding CODEC_RECORDS records per
    codec, in CODECS order (none first); kcat's only when kcat is installed."""
    producers = installed(CLIENTS)
    for client in producers:
        assert create_topic("confluent", cluster.bootstrap, codec_topic(client), 1, 3) == 0
        wait_topic(cluster, codec_topic(client), 1)

    def run(client: str) -> list[Rec]:
        recs: list[Rec] = []
        for codec in CODECS:
            batch = make_records(f"{client}-{codec}", 1, CODEC_RECORDS, pad=300)
            produce(client, cluster.bootstrap, codec_topic(client), batch,
                    ProduceSpec("all", idempotent=True, codec=codec, linger_ms=50))
            recs += batch
        return recs

    # the four clients produce at once (separate topics); each client's codecs in order
    with ThreadPoolExecutor(len(producers)) as pool:
        futures = {c: pool.submit(run, c) for c in producers}
        return {c: f.result(timeout=90) for c, f in futures.items()}


@pytest.mark.timeout(180)
@pytest.mark.parametrize("producer", CLIENTS)
def test_codec_stored_on_every_replica(cluster: LocalCluster,
                                       codec_topics: dict[str, list[Rec]],
                                       producer: str) -> None:
    requires(producer)
    topic = codec_topic(producer)
    total = len(codec_topics[producer])
    wait_hw(cluster, topic, {0: total})
    deadline = time.monotonic() + 10
    for i, node in sorted(cluster.nodes.items()):
        # followers may still be writing the tail; bounded wait for the whole log
        batches = stored_batches(node.data_dir, topic, 0)
        for _ in range(100):
            if (batches and batches[-1].last_offset >= total - 1) \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.1)
            batches = stored_batches(node.data_dir, topic, 0)
        assert batches and batches[-1].last_offset == total - 1, (i, batches[-3:])
        for b in batches:
            want = CODECS[b.base_offset // CODEC_RECORDS]
            # a batch never straddles two codecs (each codec is a separate flushed run)
            assert CODECS[b.last_offset // CODEC_RECORDS] == want, (i, b)
            assert b.codec == want, f"broker {i}: {producer} {want} batch stored as {b}"
        assert [c for c in CODECS if any(b.codec == c for b in batches)] == list(CODECS)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("consumer", CLIENTS)
def test_reads_every_clients_compressed_batches(cluster: LocalCluster,
                                                codec_topics: dict[str, list[Rec]],
                                                consumer: str) -> None:
    requires(consumer)
    for producer, recs in codec_topics.items():
        got = read(consumer, cluster.bootstrap, codec_topic(producer), counts(recs))
        check_read(got, recs, f"{consumer} reading {producer}'s batches")


# -- consumer groups: commit, stop, resume --------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("client", CLIENTS)
def test_group_commit_and_resume(cluster: LocalCluster, client: str) -> None:
    requires(client)
    topic, group = f"group-{slug(client)}", f"g-{slug(client)}"
    assert create_topic("confluent", cluster.bootstrap, topic, 3, 3) == 0
    wait_topic(cluster, topic, 3)
    first = make_records(f"{client}-first", 3, 10)
    produce("confluent", cluster.bootstrap, topic, first, ProduceSpec("all", idempotent=True))

    got = group_consume(client, cluster.bootstrap, topic, group, len(first))
    check_read(got, first, f"{client} first run")
    assert committed_offsets(cluster.bootstrap, topic, group, 3) == {0: 10, 1: 10, 2: 10}

    second = make_records(f"{client}-second", 3, 5)
    produce("confluent", cluster.bootstrap, topic, second, ProduceSpec("all", idempotent=True))
    got = group_consume(client, cluster.bootstrap, topic, group, len(second))
    check_read(got, second, f"{client} second run", first_offset=10)
    assert committed_offsets(cluster.bootstrap, topic, group, 3) == {0: 15, 1: 15, 2: 15}


# -- a mixed group --------------------------------------------------------------------------------


@pytest.mark.timeout(180)
def test_mixed_group_shares_partitions(cluster: LocalCluster) -> None:
    topic, group = "mixed", "g-mixed"
    assert create_topic("confluent", cluster.bootstrap, topic, 3, 3) == 0
    wait_topic(cluster, topic, 3)
    recs = make_records("mixed", 3, 20)
    produce("confluent", cluster.bootstrap, topic, recs, ProduceSpec("all", idempotent=True))

    members = [Member(c, cluster.bootstrap, topic, group, deadline_s=70).start()
               for c in ADMIN_CLIENTS]
    try:
        # until every member holds at least one partition and together they hold all three,
        # disjointly, and that has lasted 3 s (no rebalance in flight)
        deadline = time.monotonic() + 60
        stable_since: float | None = None
        views: list[Any] = []
        for _ in range(600):
            if time.monotonic() > deadline:
                fail_with_logs(cluster, f"no stable shared assignment in 60 s: "
                                        f"{dict(zip(ADMIN_CLIENTS, views, strict=True))}")
            for m in members:
                if m.error is not None:
                    raise m.error
            views = [m.assignment for m in members]
            ok = all(views) and sum(len(v) for v in views) == 3 \
                and frozenset().union(*views) == {0, 1, 2}
            if not ok:
                stable_since = None
            elif stable_since is None:
                stable_since = time.monotonic()
            elif time.monotonic() - stable_since >= 3:
                break
            time.sleep(0.1)
        else:
            fail_with_logs(cluster, f"no stable shared assignment in 600 polls: "
                                    f"{dict(zip(ADMIN_CLIENTS, views, strict=True))}")
        # every record was read by some member (at least once: rebalances may re-deliver)
        read_values = {v for m in members for rows in m.got.values() for _, _, v in rows}
        assert {r.value for r in recs} <= read_values
    finally:
        for m in members:
            m.join(30)
    for m in members:
        assert m.error is None, f"{m.client}: {m.error!r}"
        assert m.thread is not None and not m.thread.is_alive(), f"{m.client} did not stop"
