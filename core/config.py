"""Protocol configuration: Kafka's settings that the core obeys, and the historic-bug switches.

The default `ProtocolConfig()` is the fixed ZooKeeper-era protocol (Kafka 2.1-2.6 with the
fixes named in each switch). A switch set to True re-introduces exactly one historic bug, so
the checkers can show they find it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace


@dataclass(frozen=True, slots=True)
class Bugs:
    """Historic Kafka replication bugs, each switchable back on (see BUG_CATALOGUE)."""

    truncate_to_hw: bool = False
    kip101_only: bool = False
    no_fetch_epoch_fencing: bool = False
    unfenced_truncation: bool = False
    kip320_first_try: bool = False
    isr_expand_before_epoch_start: bool = False
    skip_truncate_same_leader: bool = False
    hw_over_committed_isr: bool = False
    no_controller_epoch_check: bool = False
    offsets_before_epoch_start: bool = False
    failover_trusts_restarted: bool = False

    def enabled(self) -> tuple[str, ...]:
        return tuple(f.name for f in fields(self) if getattr(self, f.name))


@dataclass(frozen=True, slots=True)
class ProtocolConfig:
    """Kafka settings the replication core needs (names as in server.properties, snake_case)."""

    min_insync_replicas: int = 2
    unclean_leader_election_enable: bool = False
    replica_lag_time_max_ms: int = 30_000
    replica_fetch_backoff_ms: int = 1_000
    replica_fetch_wait_max_ms: int = 500
    request_timeout_ms: int = 30_000
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    max_idempotent_batches: int = 5
    # The follower sends its next fetch in the step that handles a response, when that fetch
    # is due at once (Kafka's fetcher thread loops straight into its next request). The live
    # broker sets it; False (the checkers) keeps a FetchTimer step between the two.
    fetch_in_response_step: bool = False
    bugs: Bugs = field(default_factory=Bugs)

    def __post_init__(self) -> None:
        if self.min_insync_replicas < 1:
            raise ValueError("min.insync.replicas must be at least 1")
        for name in ("replica_lag_time_max_ms", "replica_fetch_backoff_ms", "request_timeout_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.max_idempotent_batches < 1:
            raise ValueError("max_idempotent_batches must be at least 1")

    def with_bug(self, name: str) -> ProtocolConfig:
        if name not in {f.name for f in fields(Bugs)}:
            raise ValueError(f"unknown bug switch {name!r}")
        return replace(self, bugs=replace(self.bugs, **{name: True}))


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """A topic's own replication settings: the `min.insync.replicas` and
    `unclean.leader.election.enable` overrides of `/config/topics/<topic>` (Kafka's topic
    LogConfig). None: the topic does not set it, the broker's `ProtocolConfig` value applies.

    The leader obeys `min_insync_replicas` for acks=all (admission and completion), the
    controller obeys `unclean_leader_election_enable` when the partition's leader is offline."""

    min_insync_replicas: int | None = None
    unclean_leader_election_enable: bool | None = None

    def __post_init__(self) -> None:
        m = self.min_insync_replicas
        if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m < 1):
            raise ValueError("min.insync.replicas must be an integer of at least 1")
        u = self.unclean_leader_election_enable
        if u is not None and not isinstance(u, bool):
            raise ValueError("unclean.leader.election.enable must be true or false")

    @property
    def is_default(self) -> bool:
        """True when the topic overrides nothing."""
        return self.min_insync_replicas is None and self.unclean_leader_election_enable is None

    def applied_to(self, cfg: ProtocolConfig) -> ProtocolConfig:
        """The broker's config with this topic's overrides on top: what the topic's partitions
        obey (Kafka: the topic's LogConfig overrides the broker default)."""
        if self.is_default:
            return cfg
        return replace(
            cfg,
            min_insync_replicas=(
                cfg.min_insync_replicas
                if self.min_insync_replicas is None
                else self.min_insync_replicas
            ),
            unclean_leader_election_enable=(
                cfg.unclean_leader_election_enable
                if self.unclean_leader_election_enable is None
                else self.unclean_leader_election_enable
            ),
        )


DEFAULT_TOPIC_CONFIG = TopicConfig()
