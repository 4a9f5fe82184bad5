"""One partition replica on one broker: leader, follower or neither.

Kafka's `Partition` + `ReplicaFetcherThread` + `DelayedProduce` as values. The log's bytes are
not here: the replica keeps the offsets and the leader-epoch cache, and tells the driver to
append or truncate. Every handler returns `(replica, effects)`.
"""

from __future__ import annotations

from typing import NamedTuple

from core import effects as fx
from core.config import ProtocolConfig
from core.messages import (
    FetchRequest,
    FetchResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from core.producer import ProducerTable, check_sequence, record_batch, truncate_producers
from core.rules.acks import acks_all_admissible, acks_all_satisfied
from core.rules.epochs import (
    UNDEFINED_OFFSET,
    EpochEntry,
    assign_epoch,
    end_offset_for_epoch,
    latest_epoch,
    truncate_epochs,
)
from core.rules.hw import high_watermark
from core.rules.isr import can_expand_isr, is_out_of_sync
from core.rules.truncation import divergence_offset
from core.timers import FetchTimeoutTimer, FetchTimer, ProduceTimeoutTimer, ReplicaLagTimer
from core.types import (
    NO_LEADER,
    UNDEFINED_EPOCH,
    Errors,
    FetchState,
    LeaderIsr,
    PartitionInfo,
    Role,
    TopicPartition,
    require,
)

Effects = list[fx.Effect]


class PendingProduce(NamedTuple):
    """An acks=all request in purgatory, waiting for the HW to reach `required_offset`."""

    request_id: int
    required_offset: int
    base_offset: int


class ReplicaState(NamedTuple):
    tp: TopicPartition
    broker_id: int
    replicas: tuple[int, ...]
    role: Role = Role.NONE
    leader: int = NO_LEADER
    leader_epoch: int = UNDEFINED_EPOCH
    zk_version: int = -1
    controller_epoch: int = -1  # of the controller that made the current leadership decision
    log_start_offset: int = 0
    log_end_offset: int = 0
    high_watermark: int = 0
    epochs: tuple[EpochEntry, ...] = ()
    # leader only
    isr: tuple[int, ...] = ()
    pending_isr: tuple[int, ...] | None = None  # an ISR write in flight
    leader_epoch_start_offset: int = -1
    followers: tuple[tuple[int, int | None], ...] = ()  # (broker, LEO learnt in this epoch)
    purgatory: tuple[PendingProduce, ...] = ()
    producers: ProducerTable = ()
    # follower only
    fetch_state: FetchState = FetchState.IDLE
    fetch_in_flight: bool = False
    # leader only: an attempt of the ISR write in flight ended with its outcome unknown, so
    # ZooKeeper may hold the pending ISR whatever a later attempt is told
    isr_write_unknown: bool = False


# ---------------------------------------------------------------------------------------
# creation and recovery


def new_replica(tp: TopicPartition, broker_id: int, replicas: tuple[int, ...]) -> ReplicaState:
    return ReplicaState(tp=tp, broker_id=broker_id, replicas=replicas)


def recovered_replica(
    tp: TopicPartition,
    broker_id: int,
    replicas: tuple[int, ...],
    log_start_offset: int,
    log_end_offset: int,
    epochs: tuple[EpochEntry, ...],
    hw_checkpoint: int,
    producers: ProducerTable = (),
) -> ReplicaState:
    """A replica loaded from disk after a restart. Its leader epoch is unknown (-1) until a
    LeaderAndIsr arrives, as Kafka's in-memory `Partition.leaderEpoch`."""
    return ReplicaState(
        tp=tp,
        broker_id=broker_id,
        replicas=replicas,
        log_start_offset=log_start_offset,
        log_end_offset=log_end_offset,
        high_watermark=max(log_start_offset, min(hw_checkpoint, log_end_offset)),
        epochs=truncate_epochs(epochs, log_end_offset) if log_end_offset > 0 else (),
        producers=producers,
    )


# ---------------------------------------------------------------------------------------
# LeaderAndIsr


def on_leader_and_isr(
    rs: ReplicaState, info: PartitionInfo, controller_epoch: int, cfg: ProtocolConfig
) -> tuple[ReplicaState, Effects]:
    """T7: accept only a strictly newer leader epoch; then become leader or follower."""
    if info.leader_epoch <= rs.leader_epoch or rs.broker_id not in info.replicas:
        return rs, []
    if info.leader == rs.broker_id:
        return _become_leader(rs, info, controller_epoch, cfg)
    return _become_follower(rs, info, controller_epoch, cfg)


def _abandon_leadership(rs: ReplicaState) -> Effects:
    """Effects of leaving the leader role: purgatory fails, lag timers stop."""
    out: Effects = []
    for p in rs.purgatory:
        out.append(fx.CancelTimer(ProduceTimeoutTimer(rs.tp, p.request_id)))
        out.append(fx.ProduceReply(p.request_id, rs.tp, Errors.NOT_LEADER_OR_FOLLOWER, -1))
    for f, _ in rs.followers:
        out.append(fx.CancelTimer(ReplicaLagTimer(rs.tp, f)))
    return out


def _become_leader(
    rs: ReplicaState, info: PartitionInfo, controller_epoch: int, cfg: ProtocolConfig
) -> tuple[ReplicaState, Effects]:
    out: Effects = []
    if rs.role == Role.FOLLOWER:
        out += [fx.CancelTimer(FetchTimer(rs.tp)), fx.CancelTimer(FetchTimeoutTimer(rs.tp))]
    if rs.role == Role.LEADER:
        out += [fx.CancelTimer(ReplicaLagTimer(rs.tp, f)) for f, _ in rs.followers]
    epochs = rs.epochs
    if not cfg.bugs.kip101_only:
        # KAFKA-7415: record the new epoch at the current LEO so an epoch without records
        # still has an end offset for followers that hold later-epoch data.
        epochs = assign_epoch(epochs, info.leader_epoch, rs.log_end_offset)
        if epochs != rs.epochs:
            out.append(fx.CheckpointLeaderEpochs(rs.tp, epochs))
    followers = tuple((r, None) for r in info.replicas if r != rs.broker_id)
    # Followers in the ISR count as caught up now (Kafka sets lastCaughtUpTimeMs := now).
    out += [
        fx.SetTimer(ReplicaLagTimer(rs.tp, f), cfg.replica_lag_time_max_ms)
        for f, _ in followers
        if f in info.isr
    ]
    new = rs._replace(

        role=Role.LEADER,
        leader=rs.broker_id,
        leader_epoch=info.leader_epoch,
        zk_version=info.zk_version,
        controller_epoch=controller_epoch,
        replicas=info.replicas,
        epochs=epochs,
        isr=info.isr,
        pending_isr=None,
        isr_write_unknown=False,
        leader_epoch_start_offset=rs.log_end_offset,
        followers=followers,
        fetch_state=FetchState.IDLE,
        fetch_in_flight=False,
    )
    return _maybe_advance_hw(new, out, cfg)


def _become_follower(
    rs: ReplicaState, info: PartitionInfo, controller_epoch: int, cfg: ProtocolConfig
) -> tuple[ReplicaState, Effects]:
    out: Effects = []
    if rs.role == Role.LEADER:
        out += _abandon_leadership(rs)
    same_leader = rs.role == Role.FOLLOWER and rs.leader == info.leader
    base = rs._replace(

        role=Role.FOLLOWER,
        leader=info.leader,
        leader_epoch=info.leader_epoch,
        zk_version=info.zk_version,
        controller_epoch=controller_epoch,
        replicas=info.replicas,
        isr=(),
        pending_isr=None,
        isr_write_unknown=False,
        leader_epoch_start_offset=-1,
        followers=(),
        purgatory=(),
    )
    if same_leader and cfg.bugs.skip_truncate_same_leader:
        # KAFKA-7164: the old code skipped the become-follower steps, truncation included,
        # when the leader id had not changed.
        return base, out
    out += [fx.CancelTimer(FetchTimeoutTimer(rs.tp))]
    if info.leader == NO_LEADER:
        out.append(fx.CancelTimer(FetchTimer(rs.tp)))
        return base._replace(fetch_state=FetchState.IDLE, fetch_in_flight=False), out
    if cfg.bugs.truncate_to_hw:
        # Before KIP-101: truncate to the local high watermark, then fetch.
        base, tr = _truncate(base, base.high_watermark)
        out += tr
        start = FetchState.FETCHING
    elif cfg.bugs.kip320_first_try:
        # KIP-320's first try: no truncation until a fetch reveals a mismatch.
        start = FetchState.FETCHING
    else:
        start = FetchState.TRUNCATING
    out.append(fx.SetTimer(FetchTimer(rs.tp), 0))
    return base._replace(fetch_state=start, fetch_in_flight=False), out


def _truncate(rs: ReplicaState, offset: int) -> tuple[ReplicaState, Effects]:
    if offset >= rs.log_end_offset:
        return _truncate_epochs_at_log_end(rs)
    require(offset >= 0, "truncation below offset 0")
    epochs = truncate_epochs(rs.epochs, offset)
    hw = min(rs.high_watermark, offset)
    out: Effects = [fx.TruncateTo(rs.tp, offset)]
    if epochs != rs.epochs:
        out.append(fx.CheckpointLeaderEpochs(rs.tp, epochs))
    if hw != rs.high_watermark:
        out.append(fx.CheckpointHighWatermark(rs.tp, hw))
    producers = truncate_producers(rs.producers, offset)
    return rs._replace(
log_end_offset=offset, epochs=epochs, high_watermark=hw, producers=producers
    ), out


def _truncate_epochs_at_log_end(rs: ReplicaState) -> tuple[ReplicaState, Effects]:
    """A truncation at or past the log end leaves the log alone but not the epoch cache.

    Kafka's `UnifiedLog.truncateTo` still truncates the cache from the end at the log end
    offset: a broker that became leader (its epoch starting at its log end) and lost
    leadership before appending holds an entry no record backs, which would otherwise
    conflict with the new leader's epochs (simulator seed 302110).
    """
    epochs = truncate_epochs(rs.epochs, rs.log_end_offset)
    if epochs == rs.epochs:
        return rs, []
    return rs._replace(epochs=epochs), [fx.CheckpointLeaderEpochs(rs.tp, epochs)]


def on_stop_replica(rs: ReplicaState) -> tuple[ReplicaState, Effects]:
    out: Effects = []
    if rs.role == Role.LEADER:
        out += _abandon_leadership(rs)
    if rs.role == Role.FOLLOWER:
        out += [fx.CancelTimer(FetchTimer(rs.tp)), fx.CancelTimer(FetchTimeoutTimer(rs.tp))]
    stopped = rs._replace(

        role=Role.NONE,
        leader=NO_LEADER,
        isr=(),
        pending_isr=None,
        isr_write_unknown=False,
        followers=(),
        purgatory=(),
        leader_epoch_start_offset=-1,
        fetch_state=FetchState.IDLE,
        fetch_in_flight=False,
    )
    return stopped, out


# ---------------------------------------------------------------------------------------
# follower side of replication


def on_fetch_timer(rs: ReplicaState, cfg: ProtocolConfig) -> tuple[ReplicaState, Effects]:
    """The fetcher's turn: ask the leader where to truncate, or fetch from our LEO."""
    if rs.role != Role.FOLLOWER or rs.leader == NO_LEADER or rs.fetch_in_flight:
        return rs, []
    out: Effects = []
    if rs.fetch_state == FetchState.TRUNCATING:
        if not rs.epochs:
            # No epoch known: Kafka truncates to the high watermark instead.
            rs, out = _truncate(rs, rs.high_watermark)
            rs = rs._replace(fetch_state=FetchState.FETCHING)
        else:
            req = OffsetForLeaderEpochRequest(
                replica_id=rs.broker_id,
                tp=rs.tp,
                current_leader_epoch=rs.leader_epoch,
                leader_epoch=latest_epoch(rs.epochs),
            )
            out.append(fx.Send(rs.leader, req))
            out.append(fx.SetTimer(FetchTimeoutTimer(rs.tp), cfg.request_timeout_ms))
            return rs._replace(fetch_in_flight=True), out
    if rs.fetch_state == FetchState.FETCHING:
        last_epoch = latest_epoch(rs.epochs)
        out.append(
            fx.Send(
                rs.leader,
                FetchRequest(
                    replica_id=rs.broker_id,
                    tp=rs.tp,
                    fetch_offset=rs.log_end_offset,
                    current_leader_epoch=rs.leader_epoch,
                    last_fetched_epoch=last_epoch,
                ),
            )
        )
        out.append(fx.SetTimer(FetchTimeoutTimer(rs.tp), cfg.request_timeout_ms))
        return rs._replace(fetch_in_flight=True), out
    return rs, out


def on_fetch_timeout(rs: ReplicaState, cfg: ProtocolConfig) -> tuple[ReplicaState, Effects]:
    """No answer within request.timeout.ms: forget the request and try again after a backoff."""
    if not rs.fetch_in_flight:
        return rs, []
    return rs._replace(fetch_in_flight=False), [
        fx.SetTimer(FetchTimer(rs.tp), cfg.replica_fetch_backoff_ms)
    ]


def on_send_failed(
    rs: ReplicaState, req: FetchRequest | OffsetForLeaderEpochRequest, cfg: ProtocolConfig
) -> tuple[ReplicaState, Effects]:
    """The request in flight never reached the leader, or its answer never came back (the
    connection failed): as a timeout, but now. A failure of an earlier request (another
    leader epoch) is not ours: the request in flight keeps its timeout."""
    if not _answer_for_us(rs, req.current_leader_epoch):
        return rs, []
    rs, out = on_fetch_timeout(rs, cfg)
    return rs, [fx.CancelTimer(FetchTimeoutTimer(rs.tp)), *out]


def _answer_for_us(rs: ReplicaState, current_leader_epoch: int) -> bool:
    return (
        rs.role == Role.FOLLOWER
        and rs.fetch_in_flight
        and current_leader_epoch == rs.leader_epoch
    )


def on_offset_for_leader_epoch_response(
    rs: ReplicaState, resp: OffsetForLeaderEpochResponse, cfg: ProtocolConfig
) -> tuple[ReplicaState, Effects]:
    if not _answer_for_us(rs, resp.current_leader_epoch):
        return rs, []
    if rs.fetch_state != FetchState.TRUNCATING or resp.requested_epoch != latest_epoch(rs.epochs):
        return rs, []
    out: Effects = [fx.CancelTimer(FetchTimeoutTimer(rs.tp))]
    rs = rs._replace(fetch_in_flight=False)
    if resp.error != Errors.NONE:
        out.append(fx.SetTimer(FetchTimer(rs.tp), cfg.replica_fetch_backoff_ms))
        return rs, out
    leader_epoch = resp.leader_epoch
    if cfg.bugs.kip101_only:
        leader_epoch = UNDEFINED_EPOCH  # a KIP-101 leader does not say which epoch it meant
    offset, done = divergence_offset(
        rs.epochs, rs.log_end_offset, rs.high_watermark, leader_epoch, resp.end_offset
    )
    rs, tr = _truncate(rs, offset)
    out += tr
    if done:
        rs = rs._replace(fetch_state=FetchState.FETCHING)
    out.append(fx.SetTimer(FetchTimer(rs.tp), 0))
    return rs, out


def on_fetch_response(
    rs: ReplicaState, resp: FetchResponse, cfg: ProtocolConfig
) -> tuple[ReplicaState, Effects]:
    if not _answer_for_us(rs, resp.current_leader_epoch) or rs.fetch_state != FetchState.FETCHING:
        return rs, []
    out: Effects = [fx.CancelTimer(FetchTimeoutTimer(rs.tp))]
    if resp.error in (Errors.OFFSET_OUT_OF_RANGE,) or resp.diverging:
        # Our log does not line up with the leader's: find the divergence point again.
        out.append(fx.SetTimer(FetchTimer(rs.tp), 0))
        return rs._replace(fetch_in_flight=False, fetch_state=FetchState.TRUNCATING), out
    if resp.error != Errors.NONE or resp.fetch_offset != rs.log_end_offset:
        out.append(fx.SetTimer(FetchTimer(rs.tp), cfg.replica_fetch_backoff_ms))
        return rs._replace(fetch_in_flight=False), out
    epochs = rs.epochs
    leo = rs.log_end_offset
    producers = rs.producers
    for b in resp.batches:
        require(b.base_offset == leo, "fetched batches are not contiguous with the log end")
        epochs = assign_epoch(epochs, b.leader_epoch, b.base_offset)
        leo = b.last_offset + 1
        if b.producer_id >= 0 and b.base_sequence >= 0:
            # Kafka's follower updates its ProducerStateManager from replicated batches.
            producers = record_batch(
                producers, b.producer_id, b.producer_epoch, b.base_sequence,
                b.last_offset - b.base_offset + 1, b.base_offset, cfg.max_idempotent_batches,
            )
    if resp.batches:
        out.append(fx.AppendAsFollower(rs.tp, resp.batches, resp.records))
        if epochs != rs.epochs:
            out.append(fx.CheckpointLeaderEpochs(rs.tp, epochs))
    # A follower's HW is the leader's, clamped to its own log: it may go down.
    hw = max(rs.log_start_offset, min(resp.high_watermark, leo))
    if hw != rs.high_watermark:
        out.append(fx.CheckpointHighWatermark(rs.tp, hw))
    delay = 0 if resp.batches else cfg.replica_fetch_wait_max_ms
    rs = rs._replace(fetch_in_flight=False, epochs=epochs, log_end_offset=leo,
                     high_watermark=hw, producers=producers)
    if delay == 0 and cfg.fetch_in_response_step:
        rs, fetch = on_fetch_timer(rs, cfg)
        return rs, out + fetch
    out.append(fx.SetTimer(FetchTimer(rs.tp), delay))
    return rs, out


# ---------------------------------------------------------------------------------------
# leader side of replication


def _fence(rs: ReplicaState, current_leader_epoch: int) -> Errors:
    """KIP-320 `checkCurrentLeaderEpoch` (UNDEFINED means the client sent none)."""
    if rs.role != Role.LEADER:
        return Errors.NOT_LEADER_OR_FOLLOWER
    if current_leader_epoch == UNDEFINED_EPOCH:
        return Errors.NONE
    if current_leader_epoch < rs.leader_epoch:
        return Errors.FENCED_LEADER_EPOCH
    if current_leader_epoch > rs.leader_epoch:
        return Errors.UNKNOWN_LEADER_EPOCH
    return Errors.NONE


def on_offset_for_leader_epoch_request(
    rs: ReplicaState, req: OffsetForLeaderEpochRequest, cfg: ProtocolConfig
) -> tuple[ReplicaState, Effects]:
    error = _fence(rs, req.current_leader_epoch)
    if cfg.bugs.unfenced_truncation and rs.role == Role.LEADER:
        error = Errors.NONE  # B9: answer from whatever leader we are, in any epoch
    epoch, end = UNDEFINED_EPOCH, UNDEFINED_OFFSET
    if error == Errors.NONE:
        epoch, end = end_offset_for_epoch(rs.epochs, req.leader_epoch, rs.log_end_offset)
    resp = OffsetForLeaderEpochResponse(
        tp=rs.tp,
        error=error,
        current_leader_epoch=req.current_leader_epoch,
        requested_epoch=req.leader_epoch,
        leader_epoch=epoch,
        end_offset=end,
        request_id=req.request_id,
    )
    return rs, [fx.Send(req.replica_id, resp)]


def _epoch_at(epochs: tuple[EpochEntry, ...], offset: int) -> int:
    """The leader epoch of the record at `offset`, read off the epoch cache."""
    found = UNDEFINED_EPOCH
    for e in epochs:
        if e.start_offset <= offset:
            found = e.epoch
    return found


def on_fetch_request(
    rs: ReplicaState, req: FetchRequest, cfg: ProtocolConfig
) -> tuple[ReplicaState, Effects]:
    unfenced = cfg.bugs.no_fetch_epoch_fencing or cfg.bugs.kip320_first_try
    error = _fence(rs, UNDEFINED_EPOCH if unfenced else req.current_leader_epoch)
    diverging = False
    if error == Errors.NONE and req.replica_id not in rs.replicas:
        error = Errors.NOT_LEADER_OR_FOLLOWER
    if error == Errors.NONE and (
        req.fetch_offset > rs.log_end_offset or req.fetch_offset < rs.log_start_offset
    ):
        error = Errors.OFFSET_OUT_OF_RANGE
    if (
        error == Errors.NONE
        and cfg.bugs.kip320_first_try
        and req.fetch_offset > 0
        and _epoch_at(rs.epochs, req.fetch_offset - 1) != req.last_fetched_epoch
    ):
        diverging = True
    out: Effects = []
    if error == Errors.NONE and not diverging:
        rs, out = _update_follower(rs, req.replica_id, req.fetch_offset, cfg)
    end = rs.log_end_offset if error == Errors.NONE and not diverging else req.fetch_offset
    resp = FetchResponse(
        tp=rs.tp,
        error=error,
        fetch_offset=req.fetch_offset,
        current_leader_epoch=req.current_leader_epoch,
        high_watermark=rs.high_watermark,
        log_start_offset=rs.log_start_offset,
        end_offset=end,
        diverging=diverging,
        request_id=req.request_id,
    )
    out.append(fx.Send(req.replica_id, resp))
    return rs, out


def _update_follower(
    rs: ReplicaState, follower: int, fetch_offset: int, cfg: ProtocolConfig
) -> tuple[ReplicaState, Effects]:
    """`Replica.updateFetchState`, then maybe expand the ISR and advance the HW."""
    followers = tuple((f, fetch_offset if f == follower else leo) for f, leo in rs.followers)
    rs = rs._replace(followers=followers)
    out: Effects = []
    if fetch_offset >= rs.log_end_offset:
        # Caught up now: the lag clock restarts (lastCaughtUpTimeMs := now).
        out.append(fx.SetTimer(ReplicaLagTimer(rs.tp, follower), cfg.replica_lag_time_max_ms))
    if follower not in rs.isr and rs.pending_isr is None and can_expand_isr(
        fetch_offset,
        rs.high_watermark,
        rs.leader_epoch_start_offset,
        check_epoch_start=not cfg.bugs.isr_expand_before_epoch_start,
    ):
        new_isr = tuple(r for r in rs.replicas if r in rs.isr or r == follower)
        rs, w = _propose_isr(rs, new_isr)
        out += w
        if fetch_offset < rs.log_end_offset:
            # Every ISR member is watched by its lag timer; one that joins at the HW but
            # below the log end had none (it is armed only on reaching the log end), so a
            # follower that stopped right after joining stayed in the ISR for good and the
            # HW, and every acks=all produce, waited for it (broker test, a controlled
            # shutdown: the stopping broker, a follower again, rejoined on its last fetch).
            # Kafka checks lastCaughtUpTimeMs of every ISR member; its clock starts here.
            out.append(fx.SetTimer(ReplicaLagTimer(rs.tp, follower),
                                   cfg.replica_lag_time_max_ms))
    return _maybe_advance_hw(rs, out, cfg)


def _propose_isr(rs: ReplicaState, new_isr: tuple[int, ...]) -> tuple[ReplicaState, Effects]:
    """Write the new ISR to ZooKeeper, conditional on our cached zkVersion (T16, Kafka <= 2.6).
    Until the write completes the HW is computed over the larger of the two ISRs."""
    proposed = LeaderIsr(
        leader=rs.broker_id,
        leader_epoch=rs.leader_epoch,
        isr=new_isr,
        controller_epoch=rs.controller_epoch,
        zk_version=rs.zk_version + 1,
    )
    return rs._replace(pending_isr=new_isr), [_isr_write(rs.tp, proposed)]


def _isr_write(tp: TopicPartition, proposed: LeaderIsr) -> fx.ZkWritePartitionState:
    """The leader's conditional ISR write: it lands only on the zkVersion `proposed` follows."""
    return fx.ZkWritePartitionState(
        tp=tp,
        proposed=proposed,
        expected_zk_version=proposed.zk_version - 1,
        controller_epoch_zk_version=None,
        by_controller=False,
    )


def on_isr_written(
    rs: ReplicaState, proposed: LeaderIsr, ok: bool, current: LeaderIsr | None, unknown: bool,
    cfg: ProtocolConfig,
) -> tuple[ReplicaState, Effects]:
    """The answer to our conditional ISR write: applied, refused (`current` is what ZooKeeper
    holds) or `unknown` (no answer came: ZooKeeper may have applied it)."""
    if (
        rs.role != Role.LEADER
        or rs.pending_isr != proposed.isr
        or rs.leader_epoch != proposed.leader_epoch
    ):
        return rs, []
    if not ok and unknown:
        # Unknown outcome: ZooKeeper may hold the new ISR, and a controller may elect from
        # it. Keep bounding the HW by the maximal ISR and write again, on the same zkVersion:
        # the retry lands, or is refused with what ZooKeeper holds, our own write included
        # (found by harness/sim, seeds 385633 and 397166: dropping the pending ISR here let
        # the HW pass a member of the ISR ZooKeeper held).
        return rs._replace(isr_write_unknown=True), [_isr_write(rs.tp, proposed)]
    if not ok and current != proposed:
        # Someone (the controller) changed the partition: a LeaderAndIsr will tell us what.
        # If an earlier attempt's outcome was unknown, it may have landed before that change,
        # and the controller may have elected from it: the HW stays bounded by the maximal
        # ISR until the LeaderAndIsr (found by spec's model checker once it let an expired
        # session's write land with its answer lost).
        if rs.isr_write_unknown:
            return rs, []
        # A refused shrink leaves its follower in the ISR with no lag timer (the one that
        # fired proposed it): look again, as when a write was pending (`on_lag_timer`).
        recheck = max(1, cfg.replica_lag_time_max_ms // 2)
        return rs._replace(pending_isr=None), [
            fx.SetTimer(ReplicaLagTimer(rs.tp, f), recheck)
            for f in rs.isr if f != rs.broker_id and f not in proposed.isr]
    # Written, or refused because ZooKeeper already holds exactly our write (an earlier
    # attempt of unknown outcome landed): Kafka's checkLeaderAndIsrZkData counts it as done.
    rs = rs._replace(isr=proposed.isr, pending_isr=None, zk_version=proposed.zk_version,
                     isr_write_unknown=False)
    out: Effects = [fx.ZkNotifyIsrChange(rs.tp)]
    return _maybe_advance_hw(rs, out, cfg)


def on_lag_timer(
    rs: ReplicaState, follower: int, cfg: ProtocolConfig
) -> tuple[ReplicaState, Effects]:
    """replica.lag.time.max.ms passed since `follower` was last caught up."""
    if rs.role != Role.LEADER:
        return rs, []
    joining = rs.pending_isr is not None and follower in rs.pending_isr
    if follower not in rs.isr and not joining:
        return rs, []
    if rs.pending_isr is not None:
        # fix: look again once the ISR write in flight is done (Kafka's isr-expiration task
        # runs every replica.lag.time.max.ms / 2 and skips while an update is pending). Dropping
        # the timer here left a second lagging follower in the ISR for good when two stopped
        # fetching together (a partition, a crash): the HW then waited for it forever. A
        # follower the write in flight adds is watched the same way (it joins the ISR when
        # the write lands, so its timer must still be armed then).
        return rs, [fx.SetTimer(ReplicaLagTimer(rs.tp, follower),
                                max(1, cfg.replica_lag_time_max_ms // 2))]
    leo = dict(rs.followers).get(follower)
    if not is_out_of_sync(leo, rs.log_end_offset, lag_time_expired=True):
        return rs, [fx.SetTimer(ReplicaLagTimer(rs.tp, follower), cfg.replica_lag_time_max_ms)]
    new_isr = tuple(r for r in rs.isr if r != follower)
    return _propose_isr(rs, new_isr)


def _hw_isr(rs: ReplicaState, cfg: ProtocolConfig) -> tuple[int, ...]:
    """The ISR the HW must respect: while an expansion is in flight, the maximal ISR
    (KIP-497); while a shrink is in flight, the current (larger) one."""
    if rs.pending_isr is None or cfg.bugs.hw_over_committed_isr:
        return rs.isr
    return tuple(r for r in rs.replicas if r in rs.isr or r in rs.pending_isr)


def _maybe_advance_hw(
    rs: ReplicaState, out: Effects, cfg: ProtocolConfig
) -> tuple[ReplicaState, Effects]:
    if rs.role != Role.LEADER:
        return rs, out
    leos = dict(rs.followers)
    members = tuple(leos.get(r) for r in _hw_isr(rs, cfg) if r != rs.broker_id)
    hw = high_watermark(rs.high_watermark, rs.log_end_offset, members)
    require(hw <= rs.log_end_offset, "high watermark beyond the log end")
    if hw != rs.high_watermark:
        rs = rs._replace(high_watermark=hw)
        out.append(fx.CheckpointHighWatermark(rs.tp, hw))
    return _complete_purgatory(rs, out, cfg)


def _complete_purgatory(
    rs: ReplicaState, out: Effects, cfg: ProtocolConfig
) -> tuple[ReplicaState, Effects]:
    if not rs.purgatory:
        return rs, out
    waiting: list[PendingProduce] = []
    for p in rs.purgatory:
        done, ok = acks_all_satisfied(
            rs.high_watermark, p.required_offset, len(rs.isr), cfg.min_insync_replicas
        )
        if not done:
            waiting.append(p)
            continue
        error = Errors.NONE if ok else Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        out.append(fx.CancelTimer(ProduceTimeoutTimer(rs.tp, p.request_id)))
        out.append(fx.ProduceReply(p.request_id, rs.tp, error, p.base_offset))
    if len(waiting) == len(rs.purgatory):
        return rs, out  # none completed: the same purgatory (no copy of the state)
    return rs._replace(purgatory=tuple(waiting)), out


def on_produce_timeout(rs: ReplicaState, request_id: int) -> tuple[ReplicaState, Effects]:
    kept = tuple(p for p in rs.purgatory if p.request_id != request_id)
    if len(kept) == len(rs.purgatory):
        return rs, []
    return rs._replace(purgatory=kept), [
        fx.ProduceReply(request_id, rs.tp, Errors.REQUEST_TIMED_OUT, -1)
    ]


# ---------------------------------------------------------------------------------------
# clients


def on_produce(
    rs: ReplicaState,
    request_id: int,
    acks: int,
    record_count: int,
    records: object,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    timeout_ms: int,
    cfg: ProtocolConfig,
) -> tuple[ReplicaState, Effects]:
    """`Partition.appendRecordsToLeader` and the acks=all purgatory."""
    require(record_count > 0, "a produce request with no records reached the core")

    def reply(error: Errors, base: int = -1) -> Effects:
        return [] if acks == 0 else [fx.ProduceReply(request_id, rs.tp, error, base)]

    if rs.role != Role.LEADER:
        return rs, reply(Errors.NOT_LEADER_OR_FOLLOWER)
    if acks == -1 and not acks_all_admissible(len(rs.isr), cfg.min_insync_replicas):
        return rs, reply(Errors.NOT_ENOUGH_REPLICAS)
    if producer_id >= 0:
        verdict = check_sequence(rs.producers, producer_id, producer_epoch, base_sequence,
                                 record_count)
        if verdict.error != Errors.NONE:
            return rs, reply(verdict.error)
        if verdict.duplicate_of is not None:
            # A retry of one of the last batches: append nothing and answer as the first
            # time, which for acks=all means once the original batch is committed (Kafka's
            # DelayedProduce waits for the HW to pass the duplicate's last offset too).
            # Answering at once acknowledged records that a failover could still lose.
            if acks != -1:
                return rs, reply(Errors.NONE, verdict.duplicate_of)
            pending = PendingProduce(request_id, verdict.duplicate_of + record_count,
                                     verdict.duplicate_of)
            rs = rs._replace(purgatory=(*rs.purgatory, pending))
            timer = fx.SetTimer(ProduceTimeoutTimer(rs.tp, request_id), timeout_ms)
            return _complete_purgatory(rs, [timer], cfg)
    base = rs.log_end_offset
    epochs = assign_epoch(rs.epochs, rs.leader_epoch, base)
    out: Effects = []
    if epochs != rs.epochs:
        out.append(fx.CheckpointLeaderEpochs(rs.tp, epochs))
    out.insert(0, fx.AppendAsLeader(rs.tp, base, record_count, rs.leader_epoch, records))
    producers = rs.producers
    if producer_id >= 0:
        producers = record_batch(
            producers, producer_id, producer_epoch, base_sequence, record_count, base,
            cfg.max_idempotent_batches,
        )
    rs = rs._replace(
log_end_offset=base + record_count, epochs=epochs, producers=producers
    )
    if acks == -1:
        pending = PendingProduce(request_id, base + record_count, base)
        rs = rs._replace(purgatory=(*rs.purgatory, pending))
        out.append(fx.SetTimer(ProduceTimeoutTimer(rs.tp, request_id), timeout_ms))
        return _maybe_advance_hw(rs, out, cfg)
    out += reply(Errors.NONE, base)
    return _maybe_advance_hw(rs, out, cfg)


def on_consumer_fetch(
    rs: ReplicaState, request_id: int, fetch_offset: int, current_leader_epoch: int
) -> tuple[ReplicaState, Effects]:
    """Consumers read from the leader, and only below the high watermark."""
    error = _fence(rs, current_leader_epoch)
    if error == Errors.NONE and not rs.log_start_offset <= fetch_offset <= rs.log_end_offset:
        error = Errors.OFFSET_OUT_OF_RANGE
    end = max(fetch_offset, rs.high_watermark) if error == Errors.NONE else fetch_offset
    return rs, [
        fx.ConsumerFetchReply(request_id, rs.tp, error, rs.high_watermark, fetch_offset, end)
    ]


def on_list_offsets(
    rs: ReplicaState, request_id: int, timestamp: int, current_leader_epoch: int,
    cfg: ProtocolConfig,
) -> tuple[ReplicaState, Effects]:
    error = _fence(rs, current_leader_epoch)
    offset = -1
    if error == Errors.NONE:
        if timestamp == -2:
            offset = rs.log_start_offset
        elif (
            rs.high_watermark < rs.leader_epoch_start_offset
            and not cfg.bugs.offsets_before_epoch_start
        ):
            # KIP-207: a new leader's HW may lag the old one's; refuse until it has caught up
            # with its own epoch start so the latest offset never goes backwards.
            error = Errors.OFFSET_NOT_AVAILABLE
        else:
            offset = rs.high_watermark
    return rs, [fx.ListOffsetsReply(request_id, rs.tp, error, offset)]
