"""Kafka's classic group coordinator (consumer groups and committed offsets), on one asyncio loop.

This follows Kafka's ``GroupCoordinator.scala`` / ``GroupMetadata.scala`` /
``MemberMetadata.scala`` / ``DelayedJoin.scala`` (the ZooKeeper-era coordinator) rule by rule;
docstrings name the Scala method each piece mirrors.  A group moves through

    Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
      ^                 ^   |                                                   |
      |                 |   +--(no member left)--> Empty          leader's SyncGroup stored
      +-----------------+------------- Stable <-------------------------------+
    (any state) --partition emigrated / coordinator closed--> Dead

* Member ids are ``<client_id>-<uuid4>``.  JoinGroup v4+ without a member id gets
  MEMBER_ID_REQUIRED with the id it must rejoin with (KIP-394); the id is "pending" until that
  rejoin and expires after the session timeout.
* The protocol is the one all members support with the most first-preference votes.
* A rebalance completes when every known member has rejoined (and no member is pending) or when
  the rebalance timeout (the members' largest) expires; members that did not rejoin are removed.
  A group that was Empty waits ``group_initial_rebalance_delay_ms`` first, extended by that much
  again while new members keep arriving, in total at most the rebalance timeout
  (``InitialDelayedJoin``).
* The leader's JoinGroup reply carries every member's metadata; followers get none.  The leader's
  SyncGroup assignment is persisted (GroupMetadataValue, acks=all) before anyone gets it;
  members that do not send SyncGroup within the rebalance timeout are removed (KAFKA-12890's
  ``DelayedSync``).
* Session timeouts: a member that neither heartbeats nor waits in a JoinGroup/SyncGroup for
  ``session_timeout_ms`` is removed (a new member's pending JoinGroup expires after
  ``new_member_join_timeout_ms``, Kafka's 5 minutes).
* Offsets: commits are validated (generation and member for group commits; generation -1 commits
  only while the group is Empty), appended to ``__consumer_offsets`` with acks=all, and answered
  only after the append; the cache then keeps the latest commit per partition.

Requests wait in coroutines (``join_group``/``sync_group``/``commit_offsets``), not in
purgatories: a JoinGroup may take up to the rebalance timeout to answer, which the broker
runtime must allow (Kafka mutes the connection meanwhile; clients send one request at a time
on their coordinator connection).  Timers come from the ``Clock`` port, storage from the
``OffsetsLog`` port (``ports.py``); nothing here reads the OS clock, sleeps or does I/O.

Leadership of ``__consumer_offsets`` partitions: the runtime calls ``on_became_leader`` when
this broker becomes the leader of partition p (the coordinator loads p's groups and offsets and
answers COORDINATOR_LOAD_IN_PROGRESS for p's groups until done) and ``on_resigned`` when it
stops leading p (p's groups become Dead; waiting members get NOT_COORDINATOR).  The optional
``is_partition_leader`` callback is asked on every request as well, so a partition the runtime
already knows it lost answers NOT_COORDINATOR even before ``on_resigned``.

Simplified or different from Kafka, on purpose:

* **Static membership (KIP-345) is not supported.**  A JoinGroup, SyncGroup, Heartbeat or
  OffsetCommit with a ``group_instance_id`` gets UNSUPPORTED_VERSION (35), exactly as Kafka
  brokers with inter.broker.protocol.version < 2.3 answer (``KafkaApis``: "Only enable static
  membership when IBP >= 2.3"); clients configured with ``group.instance.id`` then fail, the
  others never send one.  LeaveGroup v3+ naming an instance id gets UNKNOWN_MEMBER_ID for that
  member (no static member can exist).  Static members loaded from a log written by a real
  Kafka are kept as dynamic members.
* No transactions (TxnOffsetCommit), DeleteGroups, OffsetDelete,
  no offset retention or expiry (the latest commit is kept until overwritten), no
  ``require_stable`` waiting (nothing is ever unstable without transactions).
* Bounds Kafka does not have: ``groups_max`` (a new group beyond it gets
  COORDINATOR_NOT_AVAILABLE), ``offsets_per_group_max`` (a commit of a new partition beyond it
  gets INVALID_COMMIT_OFFSET_SIZE), pending (MEMBER_ID_REQUIRED) members per group at most
  ``group_max_size`` (then GROUP_MAX_SIZE_REACHED); ``group_max_size`` defaults to 1000
  instead of Kafka's Int.MaxValue.
* An Empty group with no members, pending members or offsets is removed at once (with a
  GroupMetadata tombstone when it had been written), where Kafka removes it at its next
  offsets-retention check.
* When a member re-sends JoinGroup (or SyncGroup) while its previous one still waits, the older
  request is answered REBALANCE_IN_PROGRESS; Kafka drops the older callback without an answer.
* Append errors map as Kafka's newer coordinator maps them (``CoordinatorOperationExceptionHelper``
  / ``appendGroupMetadataErrorToResponseError``): UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS,
  NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT -> COORDINATOR_NOT_AVAILABLE;
  NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR -> NOT_COORDINATOR; MESSAGE_TOO_LARGE,
  RECORD_LIST_TOO_LARGE, INVALID_FETCH_SIZE -> INVALID_COMMIT_OFFSET_SIZE for commits (as
  ``maybeConvertOffsetCommitError``) and UNKNOWN_SERVER_ERROR for group metadata.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import logging
import random
import uuid
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from . import records as rec
from .ports import Cancellable, Clock, OffsetsLog, RealClock

__all__ = [
    "DEAD_GROUP",
    "GroupConfig",
    "GroupCoordinator",
    "GroupOverview",
    "GroupState",
    "GroupSummary",
    "GroupView",
    "JoinGroupMember",
    "JoinResult",
    "LeaveResult",
    "MemberLeaveResult",
    "MemberSummary",
    "OffsetAndMetadata",
    "SyncResult",
    "TopicPartition",
    "commit_append_error",
    "group_append_error",
]

log = logging.getLogger(__name__)

E = ErrorCode
NONE = ErrorCode.none
UNKNOWN_MEMBER_ID = ""  # JoinGroupRequest.UNKNOWN_MEMBER_ID
NO_GENERATION = -1

TopicPartition = tuple[str, int]
_T = TypeVar("_T")


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupConfig:
    """Kafka's ``group.*`` / ``offsets.*`` broker settings (same defaults unless noted)."""

    offsets_topic_num_partitions: int = 50  # offsets.topic.num.partitions
    group_min_session_timeout_ms: int = 6_000  # group.min.session.timeout.ms
    group_max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    group_initial_rebalance_delay_ms: int = 3_000  # group.initial.rebalance.delay.ms
    group_max_size: int = 1_000  # group.max.size (Kafka: Int.MaxValue)
    offset_metadata_max_bytes: int = 4_096  # offset.metadata.max.bytes
    new_member_join_timeout_ms: int = 300_000  # GroupCoordinator.NewMemberJoinTimeoutMs
    groups_max: int = 100_000  # hiwater's bound: groups held by this coordinator
    offsets_per_group_max: int = 100_000  # hiwater's bound: committed partitions per group
    load_records_per_yield: int = 1_000  # records loaded between yields to the event loop

    def __post_init__(self) -> None:
        if self.offsets_topic_num_partitions < 1:
            raise ValueError("offsets_topic_num_partitions must be at least 1")
        if not 0 <= self.group_min_session_timeout_ms <= self.group_max_session_timeout_ms:
            raise ValueError(
                "need 0 <= group_min_session_timeout_ms <= group_max_session_timeout_ms"
            )
        for name in ("group_max_size", "groups_max", "offsets_per_group_max"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.group_initial_rebalance_delay_ms < 0 or self.offset_metadata_max_bytes < 0:
            raise ValueError("delays and sizes cannot be negative")
        if self.new_member_join_timeout_ms < 1 or self.load_records_per_yield < 1:
            raise ValueError("new_member_join_timeout_ms and load_records_per_yield must be >= 1")


# --------------------------------------------------------------------------- results


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
}


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    """``JoinGroupResult``: ``protocol_type``/``protocol_name`` are ``None`` when unknown."""

    error: int
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinGroupMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class MemberLeaveResult:
    member_id: str
    group_instance_id: str | None
    error: int


@dataclass(frozen=True, slots=True)
class LeaveResult:
    error: int
    members: tuple[MemberLeaveResult, ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset; timestamps in milliseconds since the epoch (-1: none)."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1
    commit_timestamp_ms: int = -1
    expire_timestamp_ms: int = -1

    def to_value(self) -> rec.OffsetCommitValue:
        return rec.OffsetCommitValue(
            offset=self.offset,
            metadata=self.metadata,
            commit_timestamp=self.commit_timestamp_ms,
            leader_epoch=self.leader_epoch,
            expire_timestamp=self.expire_timestamp_ms,
        )

    @staticmethod
    def from_value(v: rec.OffsetCommitValue) -> OffsetAndMetadata:
        return OffsetAndMetadata(
            offset=v.offset,
            metadata=v.metadata,
            leader_epoch=v.leader_epoch,
            commit_timestamp_ms=v.commit_timestamp,
            expire_timestamp_ms=v.expire_timestamp,
        )


@dataclass(frozen=True, slots=True)
class GroupView:
    """A read-only snapshot of a group (tests, debugging)."""

    group_id: str
    state: GroupState
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader: str | None
    members: tuple[str, ...]
    pending_members: tuple[str, ...]
    offsets: Mapping[TopicPartition, OffsetAndMetadata]


@dataclass(frozen=True, slots=True)
class MemberSummary:
    """``MemberSummary`` (DescribeGroups): metadata and assignment only while Stable."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """``GroupSummary`` (DescribeGroups): state, protocol type, protocol (only while Stable,
    else ""), members.  ``DEAD_GROUP`` stands for a group this coordinator does not hold."""

    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...] = ()


DEAD_GROUP = GroupSummary(GroupState.DEAD.value, "", "")
EMPTY_SUMMARY = GroupSummary("", "", "")  # GroupCoordinator.EmptyGroup: sent with an error


@dataclass(frozen=True, slots=True)
class GroupOverview:
    """``GroupOverview`` (ListGroups)."""

    group_id: str
    protocol_type: str
    state: str


# --------------------------------------------------------------------------- append errors


def group_append_error(code: int) -> int:
    """A failed GroupMetadata append as a JoinGroup/SyncGroup error
    (``appendGroupMetadataErrorToResponseError``)."""
    if code in (E.unknown_topic_or_partition, E.not_enough_replicas,
                E.not_enough_replicas_after_append, E.request_timed_out):  # fmt: skip
        return E.coordinator_not_available
    if code in (E.not_leader_or_follower, E.kafka_storage_error):
        return E.not_coordinator
    if code in (E.message_too_large, E.record_list_too_large, E.invalid_fetch_size):
        return E.unknown_server_error
    return code


def commit_append_error(code: int) -> int:
    """A failed offset-commit append as an OffsetCommit partition error
    (``maybeConvertOffsetCommitError``; REQUEST_TIMED_OUT as the newer coordinator maps it)."""
    if code in (E.message_too_large, E.record_list_too_large, E.invalid_fetch_size):
        return E.invalid_commit_offset_size
    return group_append_error(code)


# --------------------------------------------------------------------------- group state


@dataclass(eq=False, slots=True)
class _Member:
    """``MemberMetadata``."""

    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    group_instance_id: str | None = None
    assignment: bytes = b""
    awaiting_join: asyncio.Future[JoinResult] | None = None
    awaiting_sync: asyncio.Future[SyncResult] | None = None
    is_new: bool = False
    heartbeat_timer: Cancellable | None = None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise LookupError(f"member {self.member_id} does not support protocol {protocol!r}")

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: frozenset[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise LookupError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        """At a heartbeat deadline (no heartbeat since it was set): alive only if waiting."""
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync


@dataclass(eq=False, slots=True)
class _JoinOp:
    """A pending ``DelayedJoin`` (``initial``: ``InitialDelayedJoin``)."""

    initial: bool
    delay_ms: int
    remaining_ms: int
    timer: Cancellable | None = None


@dataclass(eq=False, slots=True)
class _Group:
    """``GroupMetadata`` (members in insertion order, which makes replies deterministic)."""

    group_id: str
    partition: int
    state: GroupState
    state_timestamp_ms: int
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, _Member] = field(default_factory=dict)
    pending_members: dict[str, Cancellable | None] = field(default_factory=dict)
    pending_sync_members: set[str] = field(default_factory=set)
    offsets: dict[TopicPartition, tuple[int, OffsetAndMetadata]] = field(default_factory=dict)
    pending_offset_commits: dict[TopicPartition, int] = field(default_factory=dict)
    new_member_added: bool = False
    join_op: _JoinOp | None = None
    sync_timer: Cancellable | None = None
    metadata_written: bool = False

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS_STATES[state]:
            raise RuntimeError(
                f"group {self.group_id}: illegal transition {self.state.value} -> {state.value}"
            )
        self.state = state
        self.state_timestamp_ms = now_ms

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join == len(self.members) and not self.pending_members

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def candidate_protocols(self) -> frozenset[str]:
        """Protocols every member supports."""
        common: set[str] | None = None
        for m in self.members.values():
            names = {name for name, _ in m.protocols}
            common = names if common is None else common & names
        return frozenset(common or ())

    def supports_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        """``GroupMetadata.supportsProtocols``."""
        names = list(names)
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(names)
        candidates = self.candidate_protocols()
        return self.protocol_type == protocol_type and any(n in candidates for n in names)

    def select_protocol(self) -> str:
        """Each member votes for its preferred common protocol; most votes wins (ties: the
        protocol first voted for, in member order)."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = m.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda p: votes[p])

    def add(self, member: _Member, future: asyncio.Future[JoinResult] | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        member.awaiting_join = future
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> _Member | None:
        member = self.members.pop(member_id, None)
        if member is not None and member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        timer = self.pending_members.pop(member_id, None)
        if timer is not None:
            timer.cancel()
        self.pending_sync_members.discard(member_id)
        return member

    def maybe_elect_new_joined_leader(self) -> bool:
        """``GroupMetadata.maybeElectNewJoinedLeader``."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].is_awaiting_join:
            return True
        for member_id, m in self.members.items():
            if m.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    def current_member_metadata(self) -> tuple[JoinGroupMember, ...]:
        protocol = self.protocol_name
        if protocol is None or self.state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE):
            raise RuntimeError(f"no member metadata for group {self.group_id} in {self.state}")
        return tuple(
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(protocol))
            for m in self.members.values()
        )

    def summary(self) -> GroupSummary:
        """``GroupMetadata.summary``: member metadata and assignments only while Stable."""
        stable = self.is_(GroupState.STABLE) and self.protocol_name is not None
        protocol = self.protocol_name if stable and self.protocol_name is not None else ""
        members = tuple(
            MemberSummary(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(protocol) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in self.members.values()
        )
        return GroupSummary(self.state.value, self.protocol_type or "", protocol, members)

    def view(self) -> GroupView:
        return GroupView(
            group_id=self.group_id,
            state=self.state,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader=self.leader_id,
            members=tuple(self.members),
            pending_members=tuple(self.pending_members),
            offsets={tp: om for tp, (_, om) in sorted(self.offsets.items())},
        )


def _resolve(future: asyncio.Future[_T] | None, value: _T) -> None:
    if future is not None and not future.done():
        future.set_result(value)


# --------------------------------------------------------------------------- the coordinator


class GroupCoordinator:
    """Kafka's classic group coordinator.  See the module docstring for what the runtime calls.

    ``log``: the ``__consumer_offsets`` port.  ``clock``: timers and wall time (default: the
    running asyncio loop and the OS clock).  ``is_partition_leader(p)``: whether this broker
    currently leads ``__consumer_offsets`` partition p (optional; the leadership hooks suffice).
    ``partition_exists(topic, partition)``: whether a committed partition exists (optional;
    OffsetCommit answers UNKNOWN_TOPIC_OR_PARTITION for those that do not, as ``KafkaApis``).
    ``rng``: the source of member-id UUIDs (seed it for reproducible runs).
    """

    def __init__(
        self,
        log: OffsetsLog,
        *,
        config: GroupConfig | None = None,
        clock: Clock | None = None,
        is_partition_leader: Callable[[int], bool] | None = None,
        partition_exists: Callable[[str, int], bool] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.log = log
        self.config = config or GroupConfig()
        self.clock: Clock = clock or RealClock()
        self.is_partition_leader = is_partition_leader
        self.partition_exists = partition_exists
        self._rng = rng
        self._active = True
        self._groups: dict[str, _Group] = {}
        self._owned: set[int] = set()
        self._loading: dict[int, asyncio.Task[None]] = {}
        self._epochs: dict[int, int] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._commit_seq = itertools.count(1)  # loaded offsets have sequence 0

    # ------------------------------------------------------------------ introspection

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition that holds ``group_id``."""
        return rec.partition_for(group_id, self.config.offsets_topic_num_partitions)

    def group(self, group_id: str) -> GroupView | None:
        g = self._groups.get(group_id)
        return None if g is None else g.view()

    def group_ids(self) -> tuple[str, ...]:
        return tuple(sorted(self._groups))

    @property
    def owned_partitions(self) -> frozenset[int]:
        return frozenset(self._owned)

    @property
    def loading_partitions(self) -> frozenset[int]:
        return frozenset(self._loading)

    # ------------------------------------------------------------------ leadership

    def on_became_leader(self, partition: int, leader_epoch: int = -1) -> asyncio.Future[None]:
        """This broker now leads ``__consumer_offsets-<partition>``: load its groups and offsets.

        Returns the loading task (already done when the partition is loaded or loading, or the
        epoch is stale).  Must be called on the coordinator's running event loop.
        ``GroupCoordinator.onElection`` / ``scheduleLoadGroupAndOffsets``.
        """
        self._check_partition(partition)
        loop = asyncio.get_running_loop()
        if leader_epoch >= 0:
            if leader_epoch < self._epochs.get(partition, -1):
                log.info("ignoring stale election for offsets partition %d", partition)
                return _done_future(loop)
            self._epochs[partition] = leader_epoch
        loading = self._loading.get(partition)
        if loading is not None:
            return loading
        if partition in self._owned:
            return _done_future(loop)
        task = loop.create_task(self._load(partition), name=f"load-__consumer_offsets-{partition}")
        self._loading[partition] = task
        return task

    def on_resigned(self, partition: int, leader_epoch: int = -1) -> None:
        """This broker no longer leads ``__consumer_offsets-<partition>``: drop its groups.

        Waiting JoinGroup/SyncGroup requests of those groups are answered NOT_COORDINATOR.
        ``GroupCoordinator.onResignation`` / ``removeGroupsForPartition``.
        """
        self._check_partition(partition)
        if leader_epoch >= 0:
            if leader_epoch < self._epochs.get(partition, -1):
                log.info("ignoring stale resignation for offsets partition %d", partition)
                return
            self._epochs[partition] = leader_epoch
        loading = self._loading.pop(partition, None)
        if loading is not None:
            loading.cancel()
        self._owned.discard(partition)
        for group_id in [g for g, grp in self._groups.items() if grp.partition == partition]:
            self._on_group_unloaded(self._groups.pop(group_id))

    async def close(self) -> None:
        """Stop: every group is unloaded (waiters get NOT_COORDINATOR), tasks are cancelled."""
        self._active = False
        for p in sorted(self._owned | set(self._loading)):
            self.on_resigned(p)
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _check_partition(self, partition: int) -> None:
        if not 0 <= partition < self.config.offsets_topic_num_partitions:
            raise ValueError(
                f"__consumer_offsets partition {partition} is outside "
                f"0..{self.config.offsets_topic_num_partitions - 1}"
            )

    async def _load(self, partition: int) -> None:
        """``GroupMetadataManager.doLoadGroupsAndOffsets``: the last record of a key wins,
        tombstones delete; then ``onGroupLoaded`` for every group."""
        offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        groups: dict[str, rec.GroupMetadataValue] = {}
        every = self.config.load_records_per_yield
        for i, (key, value) in enumerate(self.log.read(partition)):
            if i and i % every == 0:
                await asyncio.sleep(0)
            try:
                k = rec.decode_key(key)
                if isinstance(k, rec.OffsetCommitKey):
                    group_offsets = offsets.setdefault(k.group, {})
                    if value is None:
                        group_offsets.pop((k.topic, k.partition), None)
                    else:
                        v = rec.decode_offset_commit_value(value)
                        group_offsets[(k.topic, k.partition)] = OffsetAndMetadata.from_value(v)
                elif isinstance(k, rec.GroupMetadataKey):
                    if value is None:
                        groups.pop(k.group, None)
                    else:
                        groups[k.group] = rec.decode_group_metadata_value(value)
                else:
                    log.warning(
                        "offsets partition %d: unknown key version %d", partition, k.version
                    )
            except rec.RecordError as e:
                log.warning(
                    "offsets partition %d: skipping malformed record %d: %s", partition, i, e
                )
        if self._loading.get(partition) is not asyncio.current_task():
            return  # resigned (or re-elected) while loading
        del self._loading[partition]
        self._owned.add(partition)
        for group_id in sorted(set(groups) | {g for g, o in offsets.items() if o}):
            group = self._loaded_group(group_id, partition, groups.get(group_id))
            group.offsets = {tp: (0, om) for tp, om in offsets.get(group_id, {}).items()}
            self._groups[group_id] = group
            self._on_group_loaded(group)
        log.info("loaded offsets partition %d", partition)

    def _loaded_group(
        self, group_id: str, partition: int, value: rec.GroupMetadataValue | None
    ) -> _Group:
        """``GroupMetadata.loadGroup``: Stable with its members, or Empty."""
        now = self.clock.time_ms()
        if value is None:
            return _Group(group_id, partition, GroupState.EMPTY, now)
        protocol = value.protocol
        members = value.members if protocol is not None else ()
        group = _Group(
            group_id,
            partition,
            GroupState.STABLE if members else GroupState.EMPTY,
            value.current_state_timestamp if value.current_state_timestamp >= 0 else now,
            generation_id=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
            metadata_written=True,
        )
        for m in members:
            group.add(
                _Member(
                    member_id=m.member_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout,
                    session_timeout_ms=m.session_timeout,
                    protocol_type=value.protocol_type,
                    protocols=((protocol or "", m.subscription),),
                    assignment=m.assignment,
                ),
                None,
            )
        if value.leader in group.members:
            group.leader_id = value.leader
        return group

    def _on_group_loaded(self, group: _Group) -> None:
        """``GroupCoordinator.onGroupLoaded``."""
        if len(group.members) > self.config.group_max_size:
            self._prepare_rebalance(group)
        for m in group.members.values():
            self._schedule_heartbeat(group, m, m.session_timeout_ms)

    def _on_group_unloaded(self, group: _Group) -> None:
        """``GroupCoordinator.onGroupUnloaded``: Dead; waiters get NOT_COORDINATOR."""
        group.transition_to(GroupState.DEAD, self.clock.time_ms())
        for m in group.members.values():
            self._invoke_join(m, JoinResult(E.not_coordinator, m.member_id))
            self._invoke_sync(m, SyncResult(E.not_coordinator))
            if m.heartbeat_timer is not None:
                m.heartbeat_timer.cancel()
                m.heartbeat_timer = None
        for timer in group.pending_members.values():
            if timer is not None:
                timer.cancel()
        group.pending_members.clear()
        self._cancel_join_op(group)
        self._remove_sync_expiration(group)

    # ------------------------------------------------------------------ validation

    def _validate_group_status(self, group_id: str, *, offsets_api: bool) -> int:
        """``validateGroupStatus``: INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE,
        COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, or NONE."""
        if not group_id and not offsets_api:
            return E.invalid_group_id
        if not self._active:
            return E.coordinator_not_available
        p = self.partition_for(group_id)
        if p in self._loading:
            return E.coordinator_load_in_progress
        leads = self.is_partition_leader
        if p not in self._owned:
            # Leader, but not told yet: the load is about to start.
            return E.coordinator_load_in_progress if leads and leads(p) else E.not_coordinator
        if leads is not None and not leads(p):
            return E.not_coordinator
        return NONE

    @staticmethod
    def _validate_current_member(
        group: _Group, member_id: str, group_instance_id: str | None
    ) -> int:
        """``validateCurrentMember`` (no static member can exist here: see the module doc)."""
        if group_instance_id is not None or member_id not in group.members:
            return E.unknown_member_id
        return NONE

    def _new_group(self, group_id: str) -> _Group | None:
        if len(self._groups) >= self.config.groups_max:
            log.warning("refusing group %r: %d groups held", group_id, len(self._groups))
            return None
        group = _Group(
            group_id, self.partition_for(group_id), GroupState.EMPTY, self.clock.time_ms()
        )
        self._groups[group_id] = group
        return group

    # ------------------------------------------------------------------ JoinGroup

    async def join_group(
        self,
        group_id: str,
        member_id: str,
        *,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        client_id: str,
        client_host: str,
        require_known_member_id: bool,
        group_instance_id: str | None = None,
    ) -> JoinResult:
        """``handleJoinGroup``.  ``require_known_member_id`` is true for JoinGroup v4+."""
        if group_instance_id is not None:
            return JoinResult(E.unsupported_version, UNKNOWN_MEMBER_ID)  # no static membership
        err = self._validate_group_status(group_id, offsets_api=False)
        if err:
            return JoinResult(err, member_id)
        cfg = self.config
        if (
            not cfg.group_min_session_timeout_ms
            <= session_timeout_ms
            <= cfg.group_max_session_timeout_ms
        ):
            return JoinResult(E.invalid_session_timeout, member_id)
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        group = self._groups.get(group_id)
        if group is None:
            if not is_unknown:
                return JoinResult(E.unknown_member_id, member_id)
            group = self._new_group(group_id)
            if group is None:
                return JoinResult(E.coordinator_not_available, member_id)
        protos = tuple((name, bytes(data)) for name, data in protocols)
        outcome: JoinResult | asyncio.Future[JoinResult]
        if not self._accept_joining_member(group, member_id):
            self._remove_member_quietly(group, member_id)
            outcome = JoinResult(E.group_max_size_reached, UNKNOWN_MEMBER_ID)
        elif is_unknown:
            outcome = self._new_member_join(
                group, require_known_member_id, client_id, client_host,
                rebalance_timeout_ms, session_timeout_ms, protocol_type, protos,
            )  # fmt: skip
        else:
            outcome = self._current_member_join(
                group, member_id, client_id, client_host,
                rebalance_timeout_ms, session_timeout_ms, protocol_type, protos,
            )  # fmt: skip
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)
        self._maybe_drop_group(group)
        if isinstance(outcome, JoinResult):
            return outcome
        return await outcome

    def _accept_joining_member(self, group: _Group, member_id: str) -> bool:
        """``acceptJoiningMember``: group.max.size counts awaiting members while preparing."""
        max_size = self.config.group_max_size
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_(GroupState.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return (member is not None and member.is_awaiting_join) or (
                group.num_awaiting_join < max_size
            )
        return member_id in group.members or len(group.members) < max_size

    def _remove_member_quietly(self, group: _Group, member_id: str) -> None:
        """``group.remove`` as ``handleJoinGroup`` does it for a refused member."""
        member = group.remove(member_id)
        if member is not None:
            self._invoke_join(member, JoinResult(E.group_max_size_reached, UNKNOWN_MEMBER_ID))
            self._invoke_sync(member, SyncResult(E.unknown_member_id))

    def _new_member_join(
        self,
        group: _Group,
        require_known_member_id: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: tuple[tuple[str, bytes], ...],
    ) -> JoinResult | asyncio.Future[JoinResult]:
        """``doNewMemberJoinGroup`` / ``doDynamicNewMemberJoinGroup``."""
        if group.is_(GroupState.DEAD):
            return JoinResult(E.coordinator_not_available, UNKNOWN_MEMBER_ID)
        if not group.supports_protocols(protocol_type, (n for n, _ in protocols)):
            return JoinResult(E.inconsistent_group_protocol, UNKNOWN_MEMBER_ID)
        new_member_id = f"{client_id}-{self._uuid()}"
        if require_known_member_id:
            if len(group.pending_members) >= self.config.group_max_size:
                return JoinResult(E.group_max_size_reached, UNKNOWN_MEMBER_ID)
            group.pending_members[new_member_id] = self.clock.call_later(
                session_timeout_ms, lambda: self._on_pending_member_expired(group, new_member_id)
            )
            return JoinResult(E.member_id_required, new_member_id)
        return self._add_member_and_rebalance(
            group, new_member_id, client_id, client_host,
            rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols,
        )  # fmt: skip

    def _current_member_join(
        self,
        group: _Group,
        member_id: str,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: tuple[tuple[str, bytes], ...],
    ) -> JoinResult | asyncio.Future[JoinResult]:
        """``doCurrentMemberJoinGroup``."""
        if group.is_(GroupState.DEAD):
            return JoinResult(E.coordinator_not_available, member_id)
        if not group.supports_protocols(protocol_type, (n for n, _ in protocols)):
            return JoinResult(E.inconsistent_group_protocol, member_id)
        if member_id in group.pending_members:
            timer = group.pending_members[member_id]
            if timer is not None:
                timer.cancel()
            return self._add_member_and_rebalance(
                group, member_id, client_id, client_host,
                rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols,
            )  # fmt: skip
        member = group.members.get(member_id)
        if member is None:
            return JoinResult(E.unknown_member_id, member_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(
                group, member, protocols, rebalance_timeout_ms, session_timeout_ms
            )
        if state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # It missed its JoinGroup reply: the current generation again.
                return self._join_result(group, member_id)
            return self._update_member_and_rebalance(
                group, member, protocols, rebalance_timeout_ms, session_timeout_ms
            )
        if state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                # A leader's JoinGroup forces a rebalance (e.g. topic metadata changed).
                return self._update_member_and_rebalance(
                    group, member, protocols, rebalance_timeout_ms, session_timeout_ms
                )
            return self._join_result(group, member_id, with_members=False)
        return JoinResult(E.unknown_member_id, member_id)  # Empty: reset and rejoin

    def _join_result(
        self, group: _Group, member_id: str, *, with_members: bool = True
    ) -> JoinResult:
        return JoinResult(
            error=NONE,
            member_id=member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            members=(
                group.current_member_metadata()
                if with_members and group.is_leader(member_id)
                else ()
            ),
        )

    def _add_member_and_rebalance(
        self,
        group: _Group,
        member_id: str,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: tuple[tuple[str, bytes], ...],
    ) -> asyncio.Future[JoinResult]:
        """``addMemberAndRebalance``."""
        member = _Member(
            member_id=member_id,
            client_id=client_id,
            client_host=client_host,
            rebalance_timeout_ms=rebalance_timeout_ms,
            session_timeout_ms=session_timeout_ms,
            protocol_type=protocol_type,
            protocols=protocols,
            is_new=True,
        )
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        group.add(member, future)
        # New members cannot heartbeat yet: their JoinGroup itself expires after a while.
        self._schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(group)
        return future

    def _update_member_and_rebalance(
        self,
        group: _Group,
        member: _Member,
        protocols: tuple[tuple[str, bytes], ...],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
    ) -> asyncio.Future[JoinResult]:
        """``updateMemberAndRebalance``."""
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        _resolve(member.awaiting_join, JoinResult(E.rebalance_in_progress, member.member_id))
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.awaiting_join = future
        self._maybe_prepare_rebalance(group)
        return future

    # ------------------------------------------------------------------ rebalance

    def _maybe_prepare_rebalance(self, group: _Group) -> None:
        if group.state in _VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]:
            self._prepare_rebalance(group)

    def _prepare_rebalance(self, group: _Group) -> None:
        """``prepareRebalance``: Empty groups start with the initial delay."""
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, E.rebalance_in_progress)
        self._remove_sync_expiration(group)
        delay = self.config.group_initial_rebalance_delay_ms
        if group.is_(GroupState.EMPTY):
            op = _JoinOp(True, delay, max(group.rebalance_timeout_ms - delay, 0))
        else:
            op = _JoinOp(False, group.rebalance_timeout_ms, 0)
        group.transition_to(GroupState.PREPARING_REBALANCE, self.clock.time_ms())
        log.info(
            "preparing to rebalance group %s (generation %d)", group.group_id, group.generation_id
        )
        self._start_join_op(group, op)

    def _start_join_op(self, group: _Group, op: _JoinOp) -> None:
        self._cancel_join_op(group)
        group.join_op = op
        if not op.initial and group.has_all_members_joined():
            group.join_op = None
            self._on_complete_join(group)
            return
        op.timer = self.clock.call_later(op.delay_ms, lambda: self._on_join_op_expired(group, op))

    def _cancel_join_op(self, group: _Group) -> None:
        op = group.join_op
        if op is not None:
            group.join_op = None
            if op.timer is not None:
                op.timer.cancel()

    def _try_complete_join(self, group: _Group) -> None:
        """``rebalancePurgatory.checkAndComplete(GroupJoinKey)`` (``tryCompleteJoin``)."""
        op = group.join_op
        if op is not None and not op.initial and group.has_all_members_joined():
            self._cancel_join_op(group)
            self._on_complete_join(group)

    def _on_join_op_expired(self, group: _Group, op: _JoinOp) -> None:
        if group.join_op is not op:
            return
        group.join_op = None
        if op.initial and group.new_member_added and op.remaining_ms != 0:
            # InitialDelayedJoin.onComplete: members keep arriving, wait a bit more.
            group.new_member_added = False
            delay = min(self.config.group_initial_rebalance_delay_ms, op.remaining_ms)
            remaining = max(op.remaining_ms - op.delay_ms, 0)
            self._start_join_op(group, _JoinOp(True, delay, remaining))
            return
        self._on_complete_join(group)

    def _on_complete_join(self, group: _Group) -> None:
        """``onCompleteJoin``: drop members that did not rejoin, start the next generation."""
        for member_id in [mid for mid, m in group.members.items() if not m.is_awaiting_join]:
            removed = group.remove(member_id)
            if removed is not None:
                self._invoke_sync(removed, SyncResult(E.unknown_member_id))
        if group.is_(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            self._start_join_op(group, _JoinOp(False, group.rebalance_timeout_ms, 0))
            return
        now = self.clock.time_ms()
        group.generation_id += 1
        group.pending_sync_members.clear()
        if not group.members:
            group.protocol_name = None
            group.transition_to(GroupState.EMPTY, now)
            log.info("group %s is now empty (generation %d)", group.group_id, group.generation_id)
            store = self._store_group(group, {})
            self._spawn(self._after_empty_group_stored(group, group.generation_id, store))
            return
        group.protocol_name = group.select_protocol()
        group.transition_to(GroupState.COMPLETING_REBALANCE, now)
        log.info(
            "stabilized group %s generation %d (%s) with %d members",
            group.group_id, group.generation_id, group.protocol_name, len(group.members),
        )  # fmt: skip
        for member in group.members.values():
            self._invoke_join(member, self._join_result(group, member.member_id))
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        generation = group.generation_id
        group.sync_timer = self.clock.call_later(
            group.rebalance_timeout_ms, lambda: self._on_sync_expired(group, generation)
        )

    async def _after_empty_group_stored(
        self, group: _Group, generation: int, store: Coroutine[Any, Any, int]
    ) -> None:
        error = await store
        if error:
            log.warning("failed to write empty metadata for group %s: %s", group.group_id, error)
        if group.is_(GroupState.EMPTY) and group.generation_id == generation:
            self._maybe_drop_group(group)

    def _remove_sync_expiration(self, group: _Group) -> None:
        group.pending_sync_members.clear()
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def _remove_pending_sync_member(self, group: _Group, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members and group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def _on_sync_expired(self, group: _Group, generation: int) -> None:
        """``onExpirePendingSync``: members that never sent SyncGroup are removed."""
        group.sync_timer = None
        if generation != group.generation_id:
            return
        if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            pending = [mid for mid in group.members if mid in group.pending_sync_members]
            if pending:
                for member_id in pending:
                    group.remove(member_id)
                log.info("group %s removed members without SyncGroup: %s", group.group_id, pending)
                self._prepare_rebalance(group)

    # ------------------------------------------------------------------ members and timers

    def _invoke_join(self, member: _Member, result: JoinResult) -> None:
        future, member.awaiting_join = member.awaiting_join, None
        _resolve(future, result)

    def _invoke_sync(self, member: _Member, result: SyncResult) -> bool:
        future, member.awaiting_sync = member.awaiting_sync, None
        _resolve(future, result)
        return future is not None

    def _schedule_heartbeat(self, group: _Group, member: _Member, timeout_ms: int) -> None:
        """``completeAndScheduleNextExpiration``: a fresh session deadline.  A member waiting in
        JoinGroup/SyncGroup (not new) satisfies it at once, so it gets no deadline."""
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            return
        timer: Cancellable | None = None

        def expire() -> None:
            self._on_heartbeat_expired(group, member, timer)

        timer = member.heartbeat_timer = self.clock.call_later(timeout_ms, expire)

    def _on_heartbeat_expired(
        self, group: _Group, member: _Member, timer: Cancellable | None
    ) -> None:
        """``onExpireHeartbeat``."""
        if member.heartbeat_timer is not timer:
            return
        member.heartbeat_timer = None
        if group.is_(GroupState.DEAD) or group.members.get(member.member_id) is not member:
            return
        if not member.has_satisfied_heartbeat():
            log.info("member %s of group %s has failed", member.member_id, group.group_id)
            self._remove_member_and_update_group(group, member)
            self._maybe_drop_group(group)

    def _on_pending_member_expired(self, group: _Group, member_id: str) -> None:
        if group.is_(GroupState.DEAD) or member_id not in group.pending_members:
            return
        del group.pending_members[member_id]
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)
        self._maybe_drop_group(group)

    def _remove_member_and_update_group(self, group: _Group, member: _Member) -> None:
        """``removeMemberAndUpdateGroup``."""
        self._invoke_join(member, JoinResult(E.unknown_member_id, UNKNOWN_MEMBER_ID))
        self._invoke_sync(member, SyncResult(E.unknown_member_id))
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _maybe_drop_group(self, group: _Group) -> None:
        """Forget an Empty group with nothing left (Kafka: at its next offsets-retention check);
        a group whose metadata was written gets a tombstone."""
        if (
            not group.is_(GroupState.EMPTY)
            or group.members
            or group.pending_members
            or group.offsets
            or group.pending_offset_commits
            or group.join_op is not None
            or self._groups.get(group.group_id) is not group
        ):
            return
        group.transition_to(GroupState.DEAD, self.clock.time_ms())
        del self._groups[group.group_id]
        if group.metadata_written:
            key = rec.encode_group_metadata_key(group.group_id)
            self._spawn(self._append(group.partition, [(key, None)]))

    # ------------------------------------------------------------------ SyncGroup

    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        *,
        assignments: Mapping[str, bytes],
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        group_instance_id: str | None = None,
    ) -> SyncResult:
        """``handleSyncGroup`` / ``doSyncGroup``."""
        if group_instance_id is not None:
            return SyncResult(E.unsupported_version)  # no static membership
        err = self._validate_group_status(group_id, offsets_api=False)
        if err == E.coordinator_load_in_progress:
            # The rebalance state was lost: make the member rejoin (old clients do not
            # expect COORDINATOR_LOAD_IN_PROGRESS here).
            return SyncResult(E.rebalance_in_progress)
        if err:
            return SyncResult(err)
        group = self._groups.get(group_id)
        if group is None:
            return SyncResult(E.unknown_member_id)
        if group.is_(GroupState.DEAD):
            return SyncResult(E.coordinator_not_available)
        err = self._validate_current_member(group, member_id, group_instance_id)
        if err:
            return SyncResult(err)
        if generation_id != group.generation_id:
            return SyncResult(E.illegal_generation)
        if protocol_type is not None and protocol_type != group.protocol_type:
            return SyncResult(E.inconsistent_group_protocol)
        if protocol_name is not None and protocol_name != group.protocol_name:
            return SyncResult(E.inconsistent_group_protocol)
        member = group.members[member_id]
        if group.is_(GroupState.EMPTY):
            return SyncResult(E.unknown_member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return SyncResult(E.rebalance_in_progress)
        if group.is_(GroupState.STABLE):
            self._remove_pending_sync_member(group, member_id)
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            return SyncResult(NONE, member.assignment, group.protocol_type, group.protocol_name)
        # CompletingRebalance: wait for the leader's assignment to be stored.
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        _resolve(member.awaiting_sync, SyncResult(E.rebalance_in_progress))
        member.awaiting_sync = future
        self._remove_pending_sync_member(group, member_id)
        if group.is_leader(member_id):
            assignment = {mid: bytes(assignments.get(mid, b"")) for mid in group.members}
            missing = [mid for mid in group.members if mid not in assignments]
            if missing:
                log.warning("group %s: empty assignment for %s", group.group_id, missing)
            store = self._store_group(group, assignment)
            self._spawn(self._complete_sync(group, group.generation_id, assignment, store))
        return await future

    async def _complete_sync(
        self,
        group: _Group,
        generation: int,
        assignment: dict[str, bytes],
        store: Coroutine[Any, Any, int],
    ) -> None:
        """The ``storeGroup`` callback of the leader's SyncGroup."""
        error = await store
        if not (group.is_(GroupState.COMPLETING_REBALANCE) and group.generation_id == generation):
            return  # moved on while the assignment was being stored
        if error:
            self._reset_and_propagate_assignment_error(group, error)
            self._maybe_prepare_rebalance(group)
        else:
            for m in group.members.values():
                m.assignment = assignment.get(m.member_id, b"")
            self._propagate_assignment(group, NONE)
            group.transition_to(GroupState.STABLE, self.clock.time_ms())

    def _reset_and_propagate_assignment_error(self, group: _Group, error: int) -> None:
        for m in group.members.values():
            m.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: _Group, error: int) -> None:
        pt, pn = (group.protocol_type, group.protocol_name) if error == NONE else (None, None)
        for m in group.members.values():
            if self._invoke_sync(m, SyncResult(error, m.assignment, pt, pn)):
                self._schedule_heartbeat(group, m, m.session_timeout_ms)

    def _store_group(
        self, group: _Group, assignment: Mapping[str, bytes]
    ) -> Coroutine[Any, Any, int]:
        """``storeGroup``: GroupMetadataValue v3 of the group as it is now (the record is made
        here, at once); the returned coroutine appends it (acks=all) and maps the error."""
        protocol = group.protocol_name
        members = tuple(
            rec.MemberMetadataValue(
                member_id=m.member_id,
                client_id=m.client_id,
                client_host=m.client_host,
                session_timeout=m.session_timeout_ms,
                rebalance_timeout=m.rebalance_timeout_ms,
                subscription=m.metadata(protocol) if protocol is not None else b"",
                assignment=bytes(assignment.get(m.member_id, b"")),
                group_instance_id=m.group_instance_id,
            )
            for m in group.members.values()
        )
        value = rec.GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=protocol,
            leader=group.leader_id,
            members=members,
            current_state_timestamp=group.state_timestamp_ms,
        )
        group.metadata_written = True
        key = rec.encode_group_metadata_key(group.group_id)
        return self._append_group(group.partition, key, rec.encode_group_metadata_value(value))

    async def _append_group(self, partition: int, key: bytes, value: bytes) -> int:
        return group_append_error(await self._append(partition, [(key, value)]))

    # ------------------------------------------------------------------ Heartbeat, LeaveGroup

    def heartbeat(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        *,
        group_instance_id: str | None = None,
    ) -> int:
        """``handleHeartbeat``: REBALANCE_IN_PROGRESS tells a member to rejoin."""
        if group_instance_id is not None:
            return E.unsupported_version  # no static membership
        err = self._validate_group_status(group_id, offsets_api=False)
        if err == E.coordinator_load_in_progress:
            return NONE  # the group is still loading: answer blindly
        if err:
            return err
        group = self._groups.get(group_id)
        if group is None:
            return E.unknown_member_id
        if group.is_(GroupState.DEAD):
            return E.coordinator_not_available
        err = self._validate_current_member(group, member_id, group_instance_id)
        if err:
            return err
        if generation_id != group.generation_id:
            return E.illegal_generation
        if group.is_(GroupState.EMPTY):
            return E.unknown_member_id
        member = group.members[member_id]
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return E.rebalance_in_progress
        return NONE

    def leave_group(self, group_id: str, members: Sequence[tuple[str, str | None]]) -> LeaveResult:
        """``handleLeaveGroup``: ``members`` are (member_id, group_instance_id) pairs."""
        err = self._validate_group_status(group_id, offsets_api=False)
        if err:
            return LeaveResult(err)
        group = self._groups.get(group_id)
        if group is None:
            return LeaveResult(
                NONE, tuple(MemberLeaveResult(m, i, E.unknown_member_id) for m, i in members)
            )
        if group.is_(GroupState.DEAD):
            return LeaveResult(E.coordinator_not_available)
        results: list[MemberLeaveResult] = []
        for member_id, instance_id in members:
            error: int
            if member_id == UNKNOWN_MEMBER_ID:
                error = E.unknown_member_id  # removal by instance id: no static members here
            elif member_id in group.pending_members:
                timer = group.pending_members.pop(member_id)
                if timer is not None:
                    timer.cancel()
                if group.is_(GroupState.PREPARING_REBALANCE):
                    self._try_complete_join(group)
                error = NONE
            else:
                error = self._validate_current_member(group, member_id, instance_id)
                if not error:
                    log.info("member %s left group %s", member_id, group_id)
                    self._remove_member_and_update_group(group, group.members[member_id])
            results.append(MemberLeaveResult(member_id, instance_id, error))
        self._maybe_drop_group(group)
        return LeaveResult(NONE, tuple(results))

    # ------------------------------------------------------------------ offsets

    async def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        offsets: Sequence[tuple[str, int, OffsetAndMetadata]],
        *,
        group_instance_id: str | None = None,
    ) -> list[int]:
        """``handleCommitOffsets``: one error code per entry of ``offsets``, in order, sent
        only after the append (acks=all) finished."""
        n = len(offsets)
        if group_instance_id is not None:
            return [E.unsupported_version] * n  # no static membership
        results: list[int] = [NONE] * n
        exists = self.partition_exists
        todo = [i for i, (t, p, _) in enumerate(offsets) if exists is None or exists(t, p)]
        for i in set(range(n)) - set(todo):
            results[i] = E.unknown_topic_or_partition
        if not todo:
            return results
        err: int = self._validate_group_status(group_id, offsets_api=True)
        group: _Group | None = None
        if not err:
            group = self._groups.get(group_id)
            if group is None:
                if generation_id >= 0:
                    err = E.illegal_generation  # from an older generation: reject
                else:
                    group = self._new_group(group_id)  # a "simple" (manual) commit
                    if group is None:
                        err = E.coordinator_not_available
            if group is not None:
                err = self._validate_offset_commit(
                    group, generation_id, member_id, group_instance_id
                )
                if not err and group.is_(GroupState.COMPLETING_REBALANCE):
                    err = E.rebalance_in_progress
        if err or group is None:
            for i in todo:
                results[i] = err
            if group is not None:
                self._maybe_drop_group(group)
            return results
        if group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            member = group.members[member_id]
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
        task = self._spawn(self._store_offsets(group, [(i, offsets[i]) for i in todo]))
        for i, code in (await asyncio.shield(task)).items():
            results[i] = code
        return results

    def _validate_offset_commit(
        self, group: _Group, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> int:
        """``validateOffsetCommit``."""
        if group.is_(GroupState.DEAD):
            return E.coordinator_not_available
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            return NONE  # admin client or a consumer that assigns partitions itself
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            err = self._validate_current_member(group, member_id, group_instance_id)
            if err:
                return err
            return E.illegal_generation if generation_id != group.generation_id else NONE
        if not group.is_(GroupState.EMPTY):
            return E.unknown_member_id  # only members commit to a non-empty group
        return NONE

    async def _store_offsets(
        self, group: _Group, entries: list[tuple[int, tuple[str, int, OffsetAndMetadata]]]
    ) -> dict[int, int]:
        """``storeOffsets``: one batch of OffsetCommit records; the cache keeps the latest."""
        cfg = self.config
        results: dict[int, int] = {}
        accepted: list[tuple[TopicPartition, OffsetAndMetadata]] = []
        new_partitions: set[TopicPartition] = set()
        for i, (topic, partition, om) in entries:
            tp = (topic, partition)
            if len(om.metadata.encode("utf-8")) > cfg.offset_metadata_max_bytes:
                results[i] = E.offset_metadata_too_large
                continue
            if tp not in group.offsets and tp not in group.pending_offset_commits:
                new_partitions.add(tp)
                if len(group.offsets) + len(new_partitions) > cfg.offsets_per_group_max:
                    new_partitions.discard(tp)
                    results[i] = E.invalid_commit_offset_size
                    continue
            results[i] = NONE
            accepted.append((tp, om))
        if not accepted:
            self._maybe_drop_group(group)
            return results
        try:
            batch = [
                (
                    rec.encode_offset_commit_key(group.group_id, t, p),
                    rec.encode_offset_commit_value(om.to_value()),
                )
                for (t, p), om in accepted
            ]
        except rec.RecordError:  # e.g. a topic name too long for an int16 string
            for i in results:
                results[i] = results[i] or E.invalid_commit_offset_size
            self._maybe_drop_group(group)
            return results
        seq = next(self._commit_seq)
        for tp, _ in accepted:
            group.pending_offset_commits[tp] = group.pending_offset_commits.get(tp, 0) + 1
        try:
            code = await self._append(group.partition, batch)
        finally:
            for tp, _ in accepted:
                left = group.pending_offset_commits[tp] - 1
                if left:
                    group.pending_offset_commits[tp] = left
                else:
                    del group.pending_offset_commits[tp]
        if code == NONE and not group.is_(GroupState.DEAD):
            for tp, om in accepted:
                current = group.offsets.get(tp)
                if current is None or current[0] < seq:
                    group.offsets[tp] = (seq, om)
        error = commit_append_error(code)
        for i in results:
            if results[i] == NONE:
                results[i] = error
        self._maybe_drop_group(group)
        return results

    def fetch_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition] | None
    ) -> tuple[int, list[tuple[str, int, OffsetAndMetadata | None]]]:
        """``handleFetchOffsets``: (group error, [(topic, partition, committed or None)]).

        ``partitions=None`` asks for every committed partition (sorted); a requested partition
        without a commit comes back as ``None`` (offset -1)."""
        err = self._validate_group_status(group_id, offsets_api=True)
        if err:
            return err, []
        group = self._groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            if partitions is None:
                return NONE, []
            return NONE, [(t, p, None) for t, p in partitions]
        if partitions is None:
            return NONE, [(t, p, om) for (t, p), (_, om) in sorted(group.offsets.items())]
        out: list[tuple[str, int, OffsetAndMetadata | None]] = []
        for t, p in partitions:
            entry = group.offsets.get((t, p))
            out.append((t, p, None if entry is None else entry[1]))
        return NONE, out

    # ------------------------------------------------------------------ DescribeGroups, ListGroups

    def describe_group(self, group_id: str) -> tuple[int, GroupSummary]:
        """``handleDescribeGroup``: (error, summary).  A group this coordinator should hold but
        does not is ``DEAD_GROUP`` with no error (DescribeGroups v6+ turns that into
        GROUP_ID_NOT_FOUND); an error comes with ``EMPTY_SUMMARY``."""
        err = self._validate_group_status(group_id, offsets_api=True)
        if err:
            return err, EMPTY_SUMMARY
        group = self._groups.get(group_id)
        if group is None:
            return NONE, DEAD_GROUP
        return NONE, group.summary()

    def list_groups(self, states: Iterable[str] = ()) -> tuple[int, list[GroupOverview]]:
        """``handleListGroups``: the groups of the partitions this broker leads and has loaded,
        sorted by id, filtered by state names (case-insensitive; empty: all).  The error is
        COORDINATOR_LOAD_IN_PROGRESS while any partition is loading (with the groups so far)."""
        if not self._active:
            return E.coordinator_not_available, []
        wanted = {s.lower() for s in states}
        out = [
            GroupOverview(g.group_id, g.protocol_type or "", g.state.value)
            for _, g in sorted(self._groups.items())
            if not g.is_(GroupState.DEAD) and (not wanted or g.state.value.lower() in wanted)
        ]
        return (E.coordinator_load_in_progress if self._loading else NONE), out

    # ------------------------------------------------------------------ plumbing

    async def _append(self, partition: int, batch: Sequence[tuple[bytes, bytes | None]]) -> int:
        try:
            return int(await self.log.append(partition, list(batch)))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("append to __consumer_offsets-%d failed", partition)
            return int(E.unknown_server_error)

    def _spawn(self, coro: Coroutine[Any, Any, _T]) -> asyncio.Task[_T]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("group coordinator task failed", exc_info=task.exception())

    def _uuid(self) -> uuid.UUID:
        if self._rng is None:
            return uuid.uuid4()
        return uuid.UUID(int=self._rng.getrandbits(128), version=4)


def _done_future(loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
    future: asyncio.Future[None] = loop.create_future()
    future.set_result(None)
    return future
