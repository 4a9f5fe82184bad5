"""Replica assignment for new topics and log-directory placement, as Kafka does it
(`AdminUtils.assignReplicasToBrokers`, `LogManager.nextLogDirs`)."""

from __future__ import annotations


def _replica_index(first_replica_index: int, second_replica_shift: int, replica_index: int,
                   n_brokers: int) -> int:
    shift = 1 + (second_replica_shift + replica_index) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers


def _rack_alternated(brokers: tuple[int, ...], racks: dict[int, str]) -> tuple[int, ...]:
    """Brokers ordered so that consecutive ones are on different racks, as
    `AdminUtils.getRackAlternatedBrokerList`: round-robin over racks in sorted order."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(brokers):
        by_rack.setdefault(racks[b], []).append(b)
    rack_names = sorted(by_rack)
    out: list[int] = []
    i = 0
    while len(out) < len(brokers):
        rack = rack_names[i % len(rack_names)]
        pos = i // len(rack_names)
        if pos < len(by_rack[rack]):
            out.append(by_rack[rack][pos])
        i += 1
    return tuple(out)


def assign_replicas(
    brokers: tuple[int, ...],
    n_partitions: int,
    replication_factor: int,
    start_index: int,
    next_replica_shift: int,
    racks: dict[int, str] | None = None,
) -> tuple[tuple[int, ...], ...]:
    """Replica lists per partition.

    The first replica of partition p is broker `(start_index + p) % n`; the other replicas
    follow at increasing shifts from it, and the shift grows by one every time the partition
    index wraps around the broker list. Kafka picks `start_index` and `next_replica_shift` at
    random; here they are parameters so the caller owns the randomness. With racks, the broker
    list is rack-alternated first and a replica is skipped while its rack (or broker) is
    already used, until every rack is used.
    """
    if replication_factor <= 0:
        raise ValueError("replication factor must be positive")
    if n_partitions <= 0:
        raise ValueError("number of partitions must be positive")
    if racks is not None and set(racks) != set(brokers):
        raise ValueError("every broker needs a rack when racks are given")
    if replication_factor > len(brokers):
        raise ValueError(
            f"replication factor {replication_factor} larger than available brokers {len(brokers)}"
        )
    ordered = _rack_alternated(brokers, racks) if racks else tuple(sorted(brokers))
    n = len(ordered)
    n_racks = len(set(racks.values())) if racks else 1
    out: list[tuple[int, ...]] = []
    shift = next_replica_shift
    for p in range(n_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start_index) % n
        replicas = [ordered[first]]
        if racks is None:
            replicas += [ordered[_replica_index(first, shift, j, n)]
                         for j in range(replication_factor - 1)]
        else:
            used_racks = {racks[ordered[first]]}
            k = 0
            while len(replicas) < replication_factor:
                b = ordered[_replica_index(first, shift * n_racks, k, n)]
                k += 1
                rack_ok = racks[b] not in used_racks or len(used_racks) == n_racks
                broker_ok = b not in replicas or len(replicas) == n
                if rack_ok and broker_ok:
                    replicas.append(b)
                    used_racks.add(racks[b])
        out.append(tuple(replicas))
    return tuple(out)


def choose_log_dir(partition_counts: tuple[tuple[str, int], ...]) -> str:
    """The log directory with the fewest partitions; ties go to the first listed."""
    if not partition_counts:
        raise ValueError("no log directories configured")
    best = partition_counts[0]
    for entry in partition_counts[1:]:
        if entry[1] < best[1]:
            best = entry
    return best[0]
