"""Disk faults for the simulator's nemesis: torn writes and bit flips on `SimFS`.

- `torn-crash`: the machine dies in the middle of the broker's next write sequence. The
  broker's `SimFS` raises `SimulatedCrash` at one of its next few mutating operations (a
  segment write, an index write, an fsync, a checkpoint's rename); the interpreter stops
  there (what the step had not yet done is never done: its replies and fetches are not
  sent), and the machine crash keeps, of each file's unsynced tail, a random prefix whose
  last part may be garbage (`SimFS.crash(torn=True)`: a torn sector write). Recovery must
  find the damage by CRC and truncate it (docs/storage-faults.md, "torn tail": truncated).
- `bitflip`: the broker is killed, one bit of one stored file flips (a segment .log in half
  the cases, else its index, time index, leader-epoch checkpoint or a directory
  checkpoint), and the broker recovers and starts again. The atlas's outcome for a stopped
  broker ("kill" column): a segment flip is found by the recovery scan's CRC check and the
  log is truncated there (the follower fetches the rest again); an index is rebuilt; a
  checkpoint is checked against the log or clamped to it. Never a silent wrong read: the
  records served afterwards are the records written. A segment flip lands in a segment the
  restart rescans (`rescanned_segments`: from the one holding the recovery point on); one
  below it, flushed when the log rolled, is bit rot no recovery finds (atlas: "read error").

The flip lands only once nothing can count the broker as in sync any more: it is out of the
ZooKeeper ISR, out of every live leader's view of it and every live controller's cache (it
is down: its session expires, the controller removes it and tells the leader), and nothing
still on its way could put it back: no message, ZooKeeper operation or notification that its
dead process sent, or that names it as a leader or ISR member, is left anywhere (on the
wire, resent across a cut link, in a paused broker's backlog, held back by a timing fault,
queued in ZooKeeper). One scan of the simulated state (`Cluster.on_its_way`), not one
predicate per way found (seeds 227, 302503, 303021, 320065, 345482 each found one): the
fault model of Kafka's ZooKeeper era, and of spec's invariants, is that an ISR member's disk
holds what it acknowledged; a corrupted ISR member re-elected before it fetched again is
KIP-966's unclean recovery, which ZooKeeper-era Kafka has no fix for. (A torn crash needs no
such wait: the swarm flushes each append when it draws lossy crashes, so what a crash loses
was never acknowledged.)
So every spec invariant is still checked in full on these seeds.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker.recordbatch import CRC_OFFSET
from broker.store.batch import iter_headers
from broker.store.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    CheckpointError,
    parse_offsets,
    read_offsets,
)
from broker.store.fs import SimFS, SimulatedCrash
from broker.store.log import parse_topic_partition, rescan_start, segment_bases
from broker.store.segment import LOG_SUFFIX, file_stem
from core.types import Role
from harness.history import INFO, NEMESIS
from harness.sim.cluster import DATA_DIR
from harness.sim.sched import US_PER_MS
from spec.world import TP

if TYPE_CHECKING:
    from harness.sim.run import Nemesis

DISK_FAULTS = ("torn-crash", "bitflip")
TORN_MAX_OPS = 6  # the crash comes at one of the next this many mutating operations
ISR_WAIT_MS = 200  # how often a killed broker is checked for having left the ISR
ISR_WAIT_MAX_MS = 30_000  # past this, the broker restarts with its disk intact
SKIP_FILES = ("meta.properties",)  # its flip is a refusal to start (atlas: "refuse")


# A batch's first bytes (base offset, length, partition leader epoch, magic) are covered by
# no CRC, in Kafka's format as in ours (docs/storage-faults.md): a flip there is the format's
# blind spot, not something recovery can find. The swarm flips CRC-covered bytes; a test
# turns this off to show what the blind spot does (seed 5149: a flipped epoch bit goes
# unnoticed by the store, and spec's log_matching catches the replicas disagreeing).
FLIP_UNCOVERED = False


def covered_position(data: bytes, position: int) -> int:
    """`position`, moved past its batch's CRC-less prefix when it falls there (into the
    CRC-covered bytes of the same batch, the same distance on)."""
    for pos, h in iter_headers(data, validate=False):
        if pos <= position < pos + h.size:
            if position < pos + CRC_OFFSET:
                return min(pos + h.size - 1, position + CRC_OFFSET)
            return position
    return position


def rescanned_segments(fs: SimFS, partition_dir: Path) -> list[Path]:
    """The segment files of a partition that a restart after a kill scans batch by batch,
    CRCs included, in offset order: every segment from the first one holding offsets at or
    past the partition's checkpointed recovery point (broker/store/log.py `_load`, Kafka's
    `LogLoader.recoverLog`; no readable checkpoint: from the first segment). Below it a
    restart only walks batch headers, so a flipped payload bit there is found by no recovery
    (docs/storage-faults.md, "read error")."""
    try:
        points = read_offsets(fs, partition_dir.parent / RECOVERY_POINT_CHECKPOINT)
    except CheckpointError:
        points = {}
    point = points.get(parse_topic_partition(partition_dir.name), 0)
    bases = segment_bases(fs, partition_dir)
    return [partition_dir / (file_stem(b) + LOG_SUFFIX)
            for b in bases[rescan_start(bases, point):]]


def reads_otherwise(path: Path, before: bytes, after: bytes) -> bool:
    """Whether a directory checkpoint's bytes `after` a flip still parse, to other offsets
    than `before` held: a wrong value no reader can tell from the truth."""
    try:
        now = parse_offsets(after, path)
    except CheckpointError:
        return False
    try:
        return now != parse_offsets(before, path)
    except CheckpointError:
        return True


def names_in_sync(obj: object, b: int) -> bool:
    """`obj` (a message, a ZooKeeper operation or notification, a partition state), or
    anything inside it, names broker b as a leader or in an ISR: any part with an `isr`
    (LeaderIsr, PartitionInfo) whose `leader` is b or whose `isr` holds b."""
    if isinstance(obj, (int, str, bytes, float)) or obj is None:
        return False
    isr = getattr(obj, "isr", None)
    if isinstance(isr, tuple) and (b in isr or getattr(obj, "leader", None) == b):
        return True
    if isinstance(obj, tuple):  # (NamedTuples too)
        return any(names_in_sync(x, b) for x in obj)
    if dataclasses.is_dataclass(obj):
        return any(names_in_sync(getattr(obj, f.name), b) for f in dataclasses.fields(obj))
    return False


class _QuietSimulatedCrash(logging.Filter):
    """A simulated machine crash is the fault, not a broker bug: keep it out of the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, SimulatedCrash)


logging.getLogger("broker.runtime.node").addFilter(_QuietSimulatedCrash())


def stored_files(fs: SimFS, top: Path = DATA_DIR) -> list[Path]:
    """Every file under `top` that a flip may hit, in a stable order."""
    out: list[Path] = []
    if not fs.is_dir(top):
        return out
    for name in fs.listdir(top):
        p = top / name
        if fs.is_dir(p):
            out += stored_files(fs, p)
        elif name not in SKIP_FILES and not name.endswith(".tmp") and fs.file_bytes(p):
            out.append(p)
    return out


class DiskFaults:
    """The disk fault kinds of one seed's nemesis (its rng, its clock, its history)."""

    def __init__(self, nem: Nemesis) -> None:
        self.nem = nem
        self.armed: set[int] = set()  # brokers whose next writes crash the machine
        self.flips: list[dict[str, Any]] = []  # what flipped and what recovery did

    def inject(self, kind: str, b: int) -> None:
        if kind == "torn-crash":
            self._arm(b)
        elif kind == "bitflip":
            self._bitflip(b)

    # -- torn writes --------------------------------------------------------------------

    def _arm(self, b: int) -> None:
        nem, br = self.nem, self.nem.c.brokers[b]
        if br.node is None or nem.crashed:
            return
        ops = nem.rng.randrange(TORN_MAX_OPS)
        nem.crashed.add(b)
        self.armed.add(b)
        br.fs.crash_after_ops = ops
        inc = br.incarnation
        br.node.on_failure = lambda err: self._torn(b, inc, err)
        nem._log("arm-torn-crash", {"node": b, "after_ops": ops})

    def _torn(self, b: int, inc: int, err: BaseException) -> None:
        """The interpreter stopped at the simulated crash: the machine goes down now (still
        inside the step, so nothing after the interrupted write happens)."""
        nem, br = self.nem, self.nem.c.brokers[b]
        if not isinstance(err, SimulatedCrash) or br.incarnation != inc or b not in self.armed:
            return  # a real halt stays a halt
        self.armed.discard(b)
        br.crash(lossy=True, torn=True)
        report: list[str] = list(br.logs.recovery_report) if br.logs is not None else []
        nem.c.note(f"torn-crash {b}: {report}")
        nem.w.record(NEMESIS, INFO, "kill", {"node": b, "lossy": True, "torn": True,
                                             "recovery": report})
        nem._later(lambda: nem._restart(b))

    # -- bit flips ----------------------------------------------------------------------

    def _bitflip(self, b: int) -> None:
        nem, br = self.nem, self.nem.c.brokers[b]
        if br.node is None or nem.crashed:
            return
        nem.crashed.add(b)
        nem._log("kill", {"node": b, "lossy": False, "then": "bitflip"})
        br.crash(lossy=False)
        self._flip_when_out_of_isr(b, br.incarnation, ISR_WAIT_MAX_MS)

    def _flip_when_out_of_isr(self, b: int, inc: int, left_ms: int) -> None:
        nem, c = self.nem, self.nem.c
        br = c.brokers[b]
        if br.node is not None or br.incarnation != inc or nem.stopped:
            return  # restarted meanwhile (the liveness phase heals everything)
        if self._counted_in_sync(b):
            if left_ms <= 0:
                nem._restart(b)  # never left the ISR (the last replica standing): no flip
                return
            c.sched.after_us(ISR_WAIT_MS * US_PER_MS,
                             lambda: self._flip_when_out_of_isr(b, inc, left_ms - ISR_WAIT_MS))
            return
        self._flip(b)
        nem._later(lambda: nem._restart(b))

    def _counted_in_sync(self, b: int) -> bool:
        """Something could still count on b's disk (spec's strong_isr and weak_isr): b is
        leader or in the ISR in ZooKeeper, in a live leader's view (its ISR, or an expansion
        it proposed: `pending_isr`) or in a live controller's cache, or anything still on
        its way was sent by b's dead process or names b as a leader or ISR member
        (`Cluster.on_its_way`: messages on the wire, resent, in a paused broker's backlog or
        held back by a timing fault; ZooKeeper operations queued; ZooKeeper's
        notifications). One generic rule, read off the simulated state, in place of one
        predicate per way found: seeds 227 (a held LeaderAndIsr), 302503 (a queued ISR
        write), 303021 (b's last fetch, which showed it caught up: Kafka's ZooKeeper-mode
        `Partition.isReplicaIsrEligible` admits b on it while its session lives), 320065 (a
        LeaderAndIsr resent across a cut link) and 345482 (a LeaderAndIsr still going in,
        one a millisecond, after its hold ended)."""
        c = self.nem.c
        p = c.zk.partition
        if p is not None and names_in_sync(p, b):
            return True
        for br in c.brokers:
            if br.node is None:
                continue
            st = br.node.state
            for r in st.replicas:
                if r.tp == TP and r.role == Role.LEADER and (
                        b in r.isr or (r.pending_isr is not None and b in r.pending_isr)):
                    return True
            # a controller tells a (re)started broker the state it caches: a stale one (a
            # leader's ISR shrink it has not been notified of) may still name b
            if st.controller is not None and names_in_sync(st.controller.partitions, b):
                return True
        return any(src == b or names_in_sync(what, b) for src, what in c.on_its_way())

    def _flip(self, b: int) -> None:
        nem, br = self.nem, self.nem.c.brokers[b]
        files = stored_files(br.fs)
        if not files:
            return
        segments = [f for f in files if f.suffix == ".log"]
        pool = segments if segments and nem.rng.random() < 0.5 else files
        path = pool[nem.rng.randrange(len(pool))]
        data = br.fs.file_bytes(path)
        size = len(data)
        position, bit = nem.rng.randrange(size), nem.rng.randrange(8)
        if path.suffix == ".log":
            # A segment below the recovery point (flushed when the log rolled) is not
            # rescanned by the restart: its flipped payload would stay on disk unnoticed,
            # and the broker, back in the ISR by fetching past it, could later lead with an
            # acknowledged record no reader can take (bit rot of flushed data: found by no
            # recovery, in Kafka as here, outside ZooKeeper-era Kafka's guarantee like a
            # corrupted ISR member). The flip goes to the first segment the restart scans
            # instead, at the same draw (seeds 710149-710820 at --time 120: logs past 64 KiB
            # roll, and a consumer's read of such a batch halted the leader).
            scanned = rescanned_segments(br.fs, path.parent)
            if path not in scanned:  # (the drawn file has bytes: `position` is in it)
                nonempty = [(f, raw) for f in scanned if (raw := br.fs.file_bytes(f))]
                if not nonempty:
                    nem.c.note(f"bitflip skipped: no bytes of {path.parent} past its "
                               "recovery point")
                    return
                path, data = nonempty[0]
                position %= len(data)
            if not FLIP_UNCOVERED:
                position = covered_position(data, position)
        if path.name == LOG_START_OFFSET_CHECKPOINT:
            flipped = bytearray(data)
            flipped[position] ^= 1 << bit
            if reads_otherwise(path, data, bytes(flipped)):
                # A valid file with another offset: a log start moved forward hides records,
                # and nothing can tell (no checksum in Kafka's text format; the atlas: trusted
                # as read, as Kafka). Undetectable bit rot is outside the fault model (seed
                # 711379 at --time 120 turned "t 0 0" into "t 0 8"); the same bit of the
                # version line flips instead, which no reader takes for a version.
                position = 0
        br.fs.flip_bit(path, position, bit)
        # recover now, as the restart will: the projected disk is what recovery leaves
        br.logs = None
        br.open_logs()
        report: list[str] = list(br.logs.recovery_report) if br.logs is not None else []
        flip = {"node": b, "file": str(path), "position": position, "bit": bit,
                "size": size, "recovery": report}
        self.flips.append(flip)
        nem.c.note(f"bitflip {flip}")
        nem.w.record(NEMESIS, INFO, "bitflip", flip)

    def heal(self) -> None:
        """The liveness phase: a torn crash that never came is called off."""
        for b in sorted(self.armed):
            br = self.nem.c.brokers[b]
            br.fs.crash_after_ops = None
            if br.node is not None:
                br.node.on_failure = None
            self.nem.crashed.discard(b)
        self.armed.clear()
