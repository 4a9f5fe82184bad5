"""The storage fault atlas (issue #16): for every file a broker writes in a log dir and every
storage fault, what hiwater does, and what Kafka does beside it.

`ROWS` is the single source: `docs/storage-faults.md` is generated from it
(`python -m broker.store.atlas > docs/storage-faults.md`), a test checks the document is
current, and `tests/store/test_store_fault_atlas.py` injects every row's fault into a real log
and checks the row's outcome.
"""

from __future__ import annotations

from broker.store.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)
from broker.store.meta import META_PROPERTIES

CHECKPOINT_FILES = (
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    CLEANER_OFFSET_CHECKPOINT,
)
OFFSETS_FILE = "__consumer_offsets segment .log (sealed)"
META_FILE = META_PROPERTIES
FILES = (
    "segment .log (sealed)",
    "segment .log (active)",
    ".index",
    ".timeindex",
    "leader-epoch-checkpoint",
    *CHECKPOINT_FILES,
    OFFSETS_FILE,
    META_FILE,
)

FAULTS = (
    "torn tail",
    "bit flip in the middle",
    "zeroed 4 KiB page",
    "truncated to 0 bytes",
    "missing",
    "garbage",
    "valid file of another partition",
)
# meta.properties only: the identity file of a dir that belongs elsewhere
OTHER_CLUSTER = "another cluster's file"
OTHER_BROKER = "another broker's file"
STOPS = ("clean", "kill")

# What each outcome means; "category" is the class of issue #16 it falls in.
OUTCOMES: dict[str, tuple[str, str]] = {
    "intact": ("recover", "every record is served; the damage is harmless or is repaired by the "
               "normal recovery scan (segments past the recovery point are rescanned and their "
               "indexes rewritten), so there is nothing to report"),
    "rebuilt": ("rebuild", "every record is served; the file is rebuilt from the segments and "
                "a warning names it and says nothing is lost"),
    "truncated": ("recover with a warning", "the log is truncated at the first damaged batch "
                  "(later segments deleted, so the log has no hole); the warning names the file, "
                  "the bytes and the offsets lost; a follower fetches them again from the leader"),
    "truncated silently": ("recover", "the records the file held are gone and nothing on disk "
                           "says they existed (no checkpoint covers them after a kill -9)"),
    "read error": ("serve up to the damage", "the broker starts without reading the damaged "
                   "bytes (below the recovery point only batch headers are walked, as Kafka); "
                   "the store's verifying read of the damaged batch fails naming the file and "
                   "position; the broker's zero-copy fetch sends the batch as stored (as "
                   "Kafka's does): a follower validates every fetched batch, logs the partition "
                   "and retries, and a consumer that checks CRCs (the Java client's default) "
                   "refuses it"),
    "hole": ("recover with a warning", "the log starts after the missing segment; the warning "
             "names the missing file and the offsets lost"),
    "hole silently": ("recover", "a compacted log has legitimate holes (the cleaner removes "
                      "records), so a segment that lost its records cannot be told from a "
                      "cleaned one"),
    "substituted": ("undetectable", "the file is a valid segment: batches do not name their "
                    "partition, so another partition's records are served as this one's"),
    "refuse": ("refuse to start", "one line naming the file and what to do"),
}

_CKPT = "the per-directory checkpoint"
_KAFKA_SEGMENT = {
    "torn tail": "same after a kill -9 (the recovery scan truncates); after a clean stop a "
    "sealed segment is not rescanned and reads fail at the damage",
    "bit flip in the middle": "same",
    "zeroed 4 KiB page": "same after a kill -9; after a clean stop reads fail at the damage",
    "truncated to 0 bytes": "serves a hole silently (offsets missing in the middle of the "
    "log): replicas diverge",
    "missing": "the log silently starts later (or, for the active segment, ends earlier)",
    "garbage": "same after a kill -9; after a clean stop reads fail at the damage",
    "valid file of another partition": "same (undetectable)",
}
_KAFKA_INDEX = {
    "torn tail": "same (sanity check, rebuilt)",
    "bit flip in the middle": "a lookup through the damaged entry fails the read "
    "(CorruptIndexException) until the index is deleted by hand",
    "zeroed 4 KiB page": "same",
    "truncated to 0 bytes": "same",
    "missing": "same (rebuilt)",
    "garbage": "same (sanity check, rebuilt)",
    "valid file of another partition": "same",
}
_KAFKA_EPOCH = {
    "torn tail": "the log dir goes offline (KafkaStorageException: malformed line)",
    "bit flip in the middle": "trusted as read",
    "zeroed 4 KiB page": "the log dir goes offline",
    "truncated to 0 bytes": "the log dir goes offline",
    "missing": "an empty cache: epochs before the last recovery point are forgotten, so "
    "OffsetsForLeaderEpoch answers wrongly and a follower may truncate to the high watermark",
    "garbage": "the log dir goes offline",
    "valid file of another partition": "trusted: OffsetsForLeaderEpoch answers with the "
    "other partition's epochs and a follower can truncate wrongly",
}
_KAFKA_CKPT = {
    "recovery-point-offset-checkpoint": "warns and recovers every log from its first segment "
    "when the file does not parse; a missing file means recover everything",
    "replication-offset-checkpoint": "the log dir goes offline (KafkaStorageException) when "
    "the file does not parse; missing means high watermarks restart at the log start",
    "log-start-offset-checkpoint": "warns and falls back to each log's first segment",
    "cleaner-offset-checkpoint": "warns and cleans each log from its start",
}


_KAFKA_META = {
    "torn tail": "refuses to start (the shortened cluster.id: InconsistentClusterIdException)",
    "bit flip in the middle": "refuses to start (InconsistentClusterIdException)",
    "zeroed 4 KiB page": "refuses to start: the file does not parse (no version)",
    "truncated to 0 bytes": "refuses to start: the file does not parse (no version)",
    "missing": "same (written at start, ZooKeeper mode)",
    "garbage": "refuses to start: the file does not parse",
    "valid file of another partition": "same",
    OTHER_CLUSTER: "same (InconsistentClusterIdException)",
    OTHER_BROKER: "same (InconsistentBrokerIdException)",
}


def _kafka(file: str, fault: str) -> str:
    if file == META_FILE:
        return _KAFKA_META[fault]
    if file in CHECKPOINT_FILES:
        if fault == "bit flip in the middle":
            return "trusted as read (no checksum in the format)"
        if fault == "valid file of another partition":
            return "entries for partitions not in the dir are ignored"
        if fault == "truncated to 0 bytes" and file == REPLICATION_OFFSET_CHECKPOINT:
            return "the log dir goes offline"
        return _KAFKA_CKPT[file]
    if file in (".index", ".timeindex"):
        return _KAFKA_INDEX[fault]
    if file == "leader-epoch-checkpoint":
        return _KAFKA_EPOCH[fault]
    return _KAFKA_SEGMENT[fault]


def _row(file: str, fault: str, clean: str, kill: str, note: str = "") -> tuple[str, ...]:
    return (file, fault, clean, kill, note, _kafka(file, fault))


# (file, fault, outcome after a clean stop, outcome after kill -9, note, Kafka)
ROWS: tuple[tuple[str, ...], ...] = (
    # sealed segment: below the recovery point after a clean stop, rescanned after a kill -9
    _row("segment .log (sealed)", "torn tail", "truncated", "truncated",
         "the header walk of a sealed segment finds the short batch"),
    _row("segment .log (sealed)", "bit flip in the middle", "read error", "truncated",
         "a payload flip is only seen by a CRC check: at recovery or on read"),
    _row("segment .log (sealed)", "zeroed 4 KiB page", "truncated", "truncated"),
    _row("segment .log (sealed)", "truncated to 0 bytes", "truncated", "truncated",
         "better than Kafka: the hole is detected (the next segment starts past this one's end) "
         "and the log truncated there, so a follower re-fetches instead of diverging"),
    _row("segment .log (sealed)", "missing", "hole", "hole",
         "better than Kafka: detected because the leader-epoch-checkpoint still names offsets "
         "below the first segment; the warning names the missing file"),
    _row("segment .log (sealed)", "garbage", "truncated", "truncated"),
    _row("segment .log (sealed)", "valid file of another partition", "substituted",
         "substituted", "the leader-epoch-checkpoint disagrees with the new batches and is "
         "rebuilt from them (warning)"),
    # active segment: always rescanned
    _row("segment .log (active)", "torn tail", "truncated", "truncated"),
    _row("segment .log (active)", "bit flip in the middle", "truncated", "truncated"),
    _row("segment .log (active)", "zeroed 4 KiB page", "truncated", "truncated"),
    _row("segment .log (active)", "truncated to 0 bytes", "truncated", "truncated silently",
         "better than Kafka after a clean stop: the recovery point says offsets past the new "
         "log end were flushed, and the warning says which are lost"),
    _row("segment .log (active)", "missing", "truncated", "truncated",
         "better than Kafka: its index files outlive it and name the lost offsets"),
    _row("segment .log (active)", "garbage", "truncated", "truncated"),
    _row("segment .log (active)", "valid file of another partition", "substituted",
         "substituted", "the leader-epoch-checkpoint is rebuilt from the new batches"),
    # offset index
    _row(".index", "torn tail", "rebuilt", "intact"),
    _row(".index", "bit flip in the middle", "rebuilt", "intact",
         "better than Kafka: an entry pointing at the wrong batch is found by the lookup that "
         "uses it; both indexes are rebuilt then and the read is served"),
    _row(".index", "zeroed 4 KiB page", "intact", "intact",
         "zeroed entries that still ascend point at real batches or are caught on use"),
    _row(".index", "truncated to 0 bytes", "intact", "intact",
         "an empty index is valid: lookups scan the segment"),
    _row(".index", "missing", "rebuilt", "intact"),
    _row(".index", "garbage", "rebuilt", "intact"),
    _row(".index", "valid file of another partition", "intact", "intact",
         "same layout here; a different one fails the sanity check or the lookup and is "
         "rebuilt"),
    # time index
    _row(".timeindex", "torn tail", "rebuilt", "intact"),
    _row(".timeindex", "bit flip in the middle", "intact", "intact",
         "a wrong timestamp only moves where ListOffsets by time starts scanning"),
    _row(".timeindex", "zeroed 4 KiB page", "intact", "intact"),
    _row(".timeindex", "truncated to 0 bytes", "intact", "intact"),
    _row(".timeindex", "missing", "intact", "intact",
         "rebuilt together with the offset index (the warning names the .index)"),
    _row(".timeindex", "garbage", "rebuilt", "intact"),
    _row(".timeindex", "valid file of another partition", "intact", "intact"),
    # leader-epoch-checkpoint
    *(
        _row("leader-epoch-checkpoint", fault, "rebuilt", "rebuilt",
             "better than Kafka: checked against the batches' epochs at every start and "
             "rebuilt from them when it disagrees or does not parse")
        for fault in FAULTS
        if fault != "bit flip in the middle"
    ),
    _row("leader-epoch-checkpoint", "bit flip in the middle", "intact", "intact",
         "the flipped bit is in a row's line break or spacing and parses the same"),
)
_LISTS_PARTITIONS = (RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT)
_EMPTY = "read as empty (the warning names the fallback and its cost) and rewritten"
_READ_AS_EMPTY = {
    name: f"{_EMPTY}; better than Kafka: the broker never takes the dir offline for it"
    if name == REPLICATION_OFFSET_CHECKPOINT
    else f"{_EMPTY}, as Kafka"
    for name in CHECKPOINT_FILES
}
ROWS += tuple(
    _row(name, fault, outcome, outcome, note)
    if not (fault == "valid file of another partition" and name in _LISTS_PARTITIONS)
    else _row(name, fault, "rebuilt", "rebuilt", "better than Kafka: a partition it lists "
              "with no directory here is named in a warning (its records on this broker are "
              "lost: a missing partition directory is found the same way), and the file is "
              "rewritten from the logs")
    for name in CHECKPOINT_FILES
    for fault, outcome, note in (
        ("torn tail", "rebuilt", _READ_AS_EMPTY[name]),
        ("bit flip in the middle", "intact", "no checksum in Kafka's text format: a flipped "
         "digit is a wrong offset, clamped to the log (recovery point, log start, high "
         "watermark <= log end)"),
        ("zeroed 4 KiB page", "rebuilt", _READ_AS_EMPTY[name]),
        ("truncated to 0 bytes", "rebuilt", _READ_AS_EMPTY[name]),
        ("missing", "intact", "a missing file is a fresh directory's state: every log is "
         "recovered from its first segment, high watermarks from the log start"),
        ("garbage", "rebuilt", _READ_AS_EMPTY[name]),
        ("valid file of another partition", "intact", "another dir's file names none of these "
         "partitions: as missing"),
    )
)
ROWS += (
    _row(OFFSETS_FILE, "torn tail", "truncated", "truncated",
         "the group coordinator loads offsets from what is left (older commits may resurface: "
         "consumers re-read, nothing is skipped)"),
    _row(OFFSETS_FILE, "bit flip in the middle", "read error", "truncated"),
    _row(OFFSETS_FILE, "zeroed 4 KiB page", "truncated", "truncated"),
    _row(OFFSETS_FILE, "truncated to 0 bytes", "hole", "hole silently",
         "better than Kafka after a clean stop: the index, which points past the new end, "
         "says which offsets are lost; after a kill -9 the segment is rescanned and nothing "
         "says what it held (a compacted log may have holes)"),
    _row(OFFSETS_FILE, "missing", "hole", "hole",
         "better than Kafka: named, from the leader-epoch-checkpoint, as for any segment"),
    _row(OFFSETS_FILE, "garbage", "truncated", "truncated"),
    _row(OFFSETS_FILE, "valid file of another partition", "substituted", "substituted"),
)
_META_REFUSE = ("the file names another cluster (or does not parse): its identity cannot be "
                "checked, so the broker refuses, as Kafka; the line says to delete the file if "
                "the dir is this broker's")
ROWS += (
    _row(META_FILE, "torn tail", "refuse", "refuse", _META_REFUSE),
    _row(META_FILE, "bit flip in the middle", "refuse", "refuse", _META_REFUSE),
    _row(META_FILE, "zeroed 4 KiB page", "rebuilt", "rebuilt",
         "better than Kafka: a file of zeros names no broker or cluster, like a missing one, "
         "and is written again with a warning"),
    _row(META_FILE, "truncated to 0 bytes", "rebuilt", "rebuilt",
         "better than Kafka: an empty file names nothing, like a missing one, and is written "
         "again with a warning"),
    _row(META_FILE, "missing", "intact", "intact",
         "written at start once ZooKeeper's /cluster/id is known, as Kafka (a new dir, or one "
         "from before the file existed)"),
    _row(META_FILE, "garbage", "refuse", "refuse", _META_REFUSE),
    _row(META_FILE, "valid file of another partition", "intact", "intact",
         "another log dir of the same broker holds the same file"),
    _row(META_FILE, OTHER_CLUSTER, "refuse", "refuse",
         "checked before the broker registers: pointed at the wrong ZooKeeper, or the dir is "
         "another cluster's; the line names both cluster ids"),
    _row(META_FILE, OTHER_BROKER, "refuse", "refuse",
         "checked before any log of the dir is loaded; the line names both broker ids"),
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render() -> str:
    """docs/storage-faults.md."""
    out = [
        "# Storage fault atlas",
        "",
        "<!-- generated by `python -m broker.store.atlas > docs/storage-faults.md` from "
        "broker/store/atlas.py; tests/store/test_store_fault_atlas.py checks it is current "
        "and injects every row -->",
        "",
        "For every file a broker writes in a log dir and every storage fault: what hiwater "
        "does at the next start, after a clean stop and after a kill -9, and what Kafka does. "
        "Every row is injected into a real log by `tests/store/test_store_fault_atlas.py` "
        "(records written through the store API, the broker's `LogManager` started again on "
        "the damaged dir), which checks the outcome: which records are read back, which are "
        "gone, that the other partitions serve, and that the warning (logger `hiwater.store`) "
        "names the file. `tests/broker/test_storage_faults_live.py` injects one row per "
        "file kind into a broker of a live 3-broker cluster (confluent-kafka clients, acks=all, "
        "stopped by SIGKILL and by SIGTERM): it starts, names every file, truncates and "
        "fetches again from the leader, rejoins the ISR, and alone leads every partition with "
        "every acknowledged record. `tests/store/test_store_crash_points.py` crashes at every "
        "file-system operation of a scenario with segment rolls, index appends, checkpoint "
        "replaces, retention deletes and a compaction swap: every restart succeeds and no "
        "flushed record is lost. A data dir holds, per partition `<topic>-<partition>/`: "
        "`<base>.log`, `<base>.index`, `<base>.timeindex`, `leader-epoch-checkpoint` (and, "
        "for an instant, `.cleaned`/`.swap`/`.deleted`/`.tmp` files, which recovery "
        "completes or removes); per directory the four offset checkpoints.",
        "",
        "Faults: *torn tail* (the last 7 bytes cut off), *bit flip in the middle* (one bit of "
        "the byte 40 bytes past the middle: inside a record of a segment), *zeroed 4 KiB page* "
        "(the page holding the middle byte), *truncated to 0 bytes*, *missing*, *garbage* "
        "(random bytes), *valid file of another partition* (the same-named file of partition "
        "1, or of another log dir for a directory checkpoint); for `meta.properties` also "
        f"*{OTHER_CLUSTER}* and *{OTHER_BROKER}* (a valid file naming another cluster.id or "
        "broker.id). `meta.properties` (per log dir: `version=0`, `broker.id`, `cluster.id`, "
        "Kafka's ZooKeeper-mode format) is checked as Kafka does: broker.id before the dir's "
        "logs are loaded, cluster.id against ZooKeeper's `/cluster/id` before the broker "
        "registers; a refusal is one line naming the file and what to do, exit code 3 (bad "
        "input).",
        "",
        "## Outcomes",
        "",
        "| outcome | kind | meaning |",
        "|---|---|---|",
    ]
    for name, (kind, meaning) in OUTCOMES.items():
        out.append(f"| {name} | {kind} | {_cell(meaning)} |")
    out += [
        "",
        "Only `meta.properties` rows refuse to start (a dir whose owner cannot be confirmed "
        "must not be served as this broker's): every other file in a log dir can be rebuilt, "
        "truncated or ignored. A log dir the broker cannot use at all (an unreadable directory, a "
        "partition in two dirs, a compaction swap file without its `.swap-end` record) stops "
        "the broker with one line naming the path and what to do, exit code 5, never a "
        "traceback (tested). A whole partition directory missing is named in a warning, from "
        "the checkpoints that still list it (tested; Kafka says nothing); leftover "
        "`.cleaned`/`.deleted`/`.tmp` files are removed and an interrupted compaction swap "
        "completed (the crash-point test). A log that ends below its checkpointed high "
        "watermark or recovery point (unflushed at a crash, or damaged) names the offsets "
        "this broker no longer has (tested; Kafka says nothing). Kafka takes a log dir "
        "offline where hiwater rebuilds (a damaged leader-epoch-checkpoint or high-watermark "
        "checkpoint); hiwater never takes a partition offline for a storage fault, because "
        "every damaged file here is either rebuilt or truncated to a consistent prefix that "
        "replication refills.",
        "",
        "## The atlas",
        "",
        "| file | fault | after a clean stop | after kill -9 | note | Kafka |",
        "|---|---|---|---|---|---|",
    ]
    for file, fault, clean, kill, note, kafka in ROWS:
        out.append(
            f"| {_cell(file)} | {fault} | {clean} | {kill} | {_cell(note)} | {_cell(kafka)} |"
        )
    better = sum("better than Kafka" in r[4] for r in ROWS)
    out += [
        "",
        f"{len(ROWS)} rows ({len(ROWS) * len(STOPS)} cases); {better} say where hiwater does "
        "better than Kafka.",
        "",
        "## Known limits",
        "",
        "- A bit flip in a batch's first 12 bytes (base offset, length) or its leader epoch is "
        "covered by no CRC, in Kafka's format as in ours; recovery's offset checks catch a "
        "base offset that goes backwards, a read may not.",
        "- After a clean stop a sealed segment is not CRC-checked at start (as Kafka); a "
        "damaged payload is found by the first verifying read of it (a follower's, a "
        "CRC-checking consumer's), not by the zero-copy fetch path; a background scrub of "
        "sealed segments would find it sooner.",
        "- A truncation at a damaged batch removes the intact segments after it too (as "
        "Kafka's recovery does): with replication factor 1 those records are lost; with "
        "replicas the follower fetches them again.",
        "",
    ]
    return "\n".join(out)


if __name__ == "__main__":
    print(render(), end="")
