"""When the final reads may stop short of a key's target: the partition's end is confirmed
below it.

The final reads read every key from the beginning up to its *target*, the highest offset any
op saw (`QueueGen.max_offsets`, Jepsen's `track-key-offsets`). When an unclean election (or
a disk that lost unflushed records) truncates a partition and nobody writes to it again,
that offset no longer exists: reading "up to the target" waits until the final phase's time
limit and the run ends unknown, although the acknowledged records it cannot find are lost.
(Jepsen's `final-polls` also waits for the target; its checker then misses the loss.)

So each final-phase thread also asks, about once a second, for the end offsets of the keys it
has not finished (`end-offsets`, ListOffsets earliest and latest at the partitions' leaders;
latest is the high watermark). `TruncationGate` finishes key k at end offset E when:

- E <= target: the target offset does not exist (offsets are below the end offset);
- the thread's own final polls read up to E (offset E - 1 was read), or there is nothing to
  read (E <= the log start offset);
- E is *stable*: at least `confirmations` answers in a row, spread over `stable_s` or more,
  gave the same E from the same leader epoch, with no failed answer between them. A leader
  answers ListOffsets latest only once its high watermark has reached its epoch's start
  offset (KIP-207: OFFSET_NOT_AVAILABLE before, which restarts the streak), so a new leader's
  lagging high watermark is not taken for its end; any later movement of the watermark (a
  follower catching up, a new election) changes E or the epoch and restarts the streak too.
  A client that cannot tell the epoch (None) never confirms (`need_epoch`).

The workload then records the confirmation on the `end-offsets` completion (`truncated
[[k, E], ...]`), and the queue checker reports every write that must have committed at an
offset >= E of k as `truncated_write` (harness.checkers.queue). What remains possible: a
high watermark held back for longer than `stable_s` by an ISR follower that does not fetch
(after the nemesis healed everything, every broker runs and fetches), with acks=1 records
above it; `stable_s` is the guard against that.

The gate is pure (times are arguments), so its decisions are unit-tested without a cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.clients.base import EndOffset


@dataclass(frozen=True)
class _Streak:
    end: EndOffset  # the latest answer
    first_s: float  # when the streak's first answer came
    last_s: float  # when its latest answer came
    count: int


class TruncationGate:
    """Per key, the run of identical end-offset answers; `confirmed_end` decides."""

    def __init__(self, confirmations: int = 3, stable_s: float = 3.0,
                 need_epoch: bool = True) -> None:
        if confirmations < 2 or stable_s < 0:
            raise ValueError("need confirmations >= 2 and stable_s >= 0")
        self.confirmations = confirmations
        self.stable_s = stable_s
        self.need_epoch = need_epoch
        self._streaks: dict[int, _Streak] = {}

    def observe(self, k: int, end: EndOffset | None, now_s: float) -> None:
        """An answer for k at `now_s` (monotonic seconds); None: k's partition did not answer
        (an error, e.g. OFFSET_NOT_AVAILABLE from a new leader), which ends the streak."""
        if end is None or (self.need_epoch and end.leader_epoch is None):
            self._streaks.pop(k, None)
            return
        s = self._streaks.get(k)
        if s is not None and (s.end.high, s.end.leader_epoch) == (end.high, end.leader_epoch):
            self._streaks[k] = _Streak(end, s.first_s, now_s, s.count + 1)
        else:
            self._streaks[k] = _Streak(end, now_s, now_s, 1)

    def forget(self, k: int) -> None:
        self._streaks.pop(k, None)

    def confirmed_end(self, k: int, target: int, read_to: int) -> int | None:
        """k's end offset E if the reads are done with k although they never reached
        `target`: E is stable, E <= target, and `read_to` (the highest offset of k this
        thread's final polls read, -1 for none) reached E - 1 or there is nothing to read.
        None otherwise (keep reading, keep asking)."""
        s = self._streaks.get(k)
        if s is None or s.count < self.confirmations or s.last_s - s.first_s < self.stable_s:
            return None
        e = s.end
        if e.high > target:
            return None  # the target exists: read up to it
        if e.high > e.low and read_to < e.high - 1:
            return None  # records below the end not read yet
        return e.high
