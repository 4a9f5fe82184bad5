"""The follower's fetcher when a request never reaches the leader (Kafka
`AbstractFetcherThread.processFetchRequest`: a failed fetch backs the partition off for
replica.fetch.backoff.ms and retries), one rule per test, driven through `core.step`."""

from __future__ import annotations

from core import effects as fx
from core import events as ev
from core.config import ProtocolConfig
from core.messages import FetchRequest, LeaderAndIsrRequest, OffsetForLeaderEpochRequest
from core.node import BrokerState, init, replica, step
from core.timers import FetchTimeoutTimer, FetchTimer
from core.types import PartitionInfo, TopicPartition

TP = TopicPartition("t", 0)
CFG = ProtocolConfig(replica_fetch_backoff_ms=250)  # not the default: the backoff is this one


def follower_with_fetch_in_flight() -> tuple[BrokerState, FetchRequest]:
    """Broker 1 follows 0 in leader epoch 2 (empty log, nothing to truncate), a Fetch sent."""
    s, _ = step(init(1, CFG), ev.Started())
    s, _ = step(s, ev.BrokerRegistered(1))
    info = PartitionInfo(TP, 0, 2, (0, 1), 0, (0, 1, 2))
    s, _ = step(s, ev.MessageReceived(9, LeaderAndIsrRequest(9, 1, 1, (info,))))
    s, out = step(s, ev.TimerFired(FetchTimer(TP)))
    (fetch,) = [e.message for e in out
                if isinstance(e, fx.Send) and isinstance(e.message, FetchRequest)]
    return s, fetch


def test_a_fetch_that_could_not_be_sent_is_retried_after_the_fetch_backoff() -> None:
    """Kafka rule: a fetch that fails (the connection to the leader broke) is not waited
    for until request.timeout.ms: its timeout is cancelled, nothing is in flight any more,
    and the next fetch goes out after replica.fetch.backoff.ms."""
    s, fetch = follower_with_fetch_in_flight()
    r = replica(s, TP)
    assert r is not None and r.fetch_in_flight
    s2, out = step(s, ev.SendFailed(0, fetch))
    assert out == [fx.CancelTimer(FetchTimeoutTimer(TP)), fx.SetTimer(FetchTimer(TP), 250)]
    r2 = replica(s2, TP)
    assert r2 is not None and not r2.fetch_in_flight


def test_a_failure_of_a_request_from_an_earlier_leader_epoch_is_ignored() -> None:
    """Kafka rule: the fetcher acts only on the outcome of the request it has in flight for
    the current leader epoch; the failure of one sent in an earlier epoch (or of a truncation
    request once fetching) neither cancels the current fetch's timeout nor re-arms a fetch."""
    s, fetch = follower_with_fetch_in_flight()
    old = FetchRequest(fetch.replica_id, TP, fetch.fetch_offset, 1, fetch.last_fetched_epoch,
                       request_id=fetch.request_id)
    assert step(s, ev.SendFailed(0, old)) == (s, [])
    # nothing in flight: a late failure of the request already answered changes nothing
    s2, _ = step(s, ev.SendFailed(0, fetch))
    assert step(s2, ev.SendFailed(0, fetch)) == (s2, [])
    assert step(s2, ev.SendFailed(0, OffsetForLeaderEpochRequest(1, TP, 2, 0))) == (s2, [])
