"""The FS port: every byte the store reads or writes goes through it.

Two implementations:

- `RealFS`: the operating system (os.writev / os.pread / os.fsync / os.replace), file handles
  expose a real `fileno()` so reads can be served with `os.sendfile`.
- `SimFS`: an in-memory file system that separates the page cache from durable bytes, as a disk
  does. `fsync(file)` makes a file's contents durable, `fsync_dir(dir)` makes the directory's
  entries (creations, renames, removals) durable. `crash()` throws the page cache away: what was
  not fsynced is lost, optionally with torn writes (a random part of the unsynced tail survives,
  possibly garbled). Bit flips and short reads are available on demand. Deterministic: all
  randomness comes from the seed.

Directories themselves are durable as soon as they are made (the store fsyncs the parent anyway).
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from broker.store.errors import LogClosedError

Buf = bytes | bytearray | memoryview

IOV_MAX = 1024


class FileHandle(Protocol):
    """An open file. Writes only append; the store never rewrites bytes in place."""

    path: Path

    def size(self) -> int: ...

    def append(self, pieces: Sequence[Buf]) -> int:
        """Append the pieces in order; return the new size."""
        ...

    def append_batch(self, head: Buf, body: Buf, nbytes: int) -> int:
        """Append `head` then `body` (`nbytes` = their total length, known to the caller) with
        one gathering write and no concatenation; return the new size."""
        ...

    def pread(self, position: int, length: int) -> bytes:
        """Read up to `length` bytes at `position` (may return fewer: use `read_exact`)."""
        ...

    def truncate(self, size: int) -> None: ...

    def fsync(self) -> None: ...

    def fileno(self) -> int | None:
        """A real descriptor usable with os.sendfile, or None (simulated file)."""
        ...

    def release(self) -> None:
        """Let go of the file but keep the descriptor's number until `close`: an unlinked
        file's blocks are freed, and a sendfile still in flight on that number reads an early
        end (an error) instead of whichever file would be given the number next."""
        ...

    def close(self) -> None: ...


class FS(Protocol):
    def open(self, path: Path, *, create: bool = False) -> FileHandle: ...

    def exists(self, path: Path) -> bool: ...

    def is_dir(self, path: Path) -> bool: ...

    def listdir(self, path: Path) -> list[str]: ...

    def makedirs(self, path: Path) -> None: ...

    def remove(self, path: Path) -> None: ...

    def rmdir(self, path: Path) -> None: ...

    def rename(self, src: Path, dst: Path) -> None:
        """Atomically rename, replacing `dst` if it exists."""
        ...

    def fsync_dir(self, path: Path) -> None: ...


def read_exact(handle: FileHandle, position: int, length: int) -> bytes:
    """Read `length` bytes, looping over short reads; fewer only at end of file."""
    first = handle.pread(position, length)
    if len(first) == length or not first:
        return first
    parts = [first]
    got = len(first)
    for _ in range(length):  # bounded: each round reads >= 1 byte or stops
        chunk = handle.pread(position + got, length - got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
        if got == length:
            break
    return b"".join(parts)


def read_whole(fs: FS, path: Path) -> bytes:
    handle = fs.open(path)
    try:
        return read_exact(handle, 0, handle.size())
    finally:
        handle.close()


def write_atomic(fs: FS, path: Path, data: bytes) -> None:
    """Crash-safe replace: write a temp file, fsync it, rename over `path`, fsync the directory.

    After a crash the file holds either the old or the new contents, never a mix."""
    tmp = path.with_name(path.name + ".tmp")
    if fs.exists(tmp):
        fs.remove(tmp)
    handle = fs.open(tmp, create=True)
    try:
        handle.append([data])
        handle.fsync()
    finally:
        handle.close()
    fs.rename(tmp, path)
    fs.fsync_dir(path.parent)


# --------------------------------------------------------------------------------------------
# Real file system


class RealFile:
    __slots__ = ("_fd", "_size", "path")

    def __init__(self, path: Path, fd: int):
        self.path = path
        self._fd = fd
        self._size = os.fstat(fd).st_size

    def size(self) -> int:
        return self._size

    def append(self, pieces: Sequence[Buf]) -> int:
        fd = self._fd
        if len(pieces) == 1:
            data = pieces[0]
            n = os.write(fd, data)
            if n != len(data):
                self._finish(memoryview(data)[n:])
            self._size += len(data)
            return self._size
        if len(pieces) <= IOV_MAX:
            total = sum(map(len, pieces))
            n = os.writev(fd, pieces)
            if n != total:
                self._finish(memoryview(b"".join(pieces))[n:])
            self._size += total
            return self._size
        for start in range(0, len(pieces), IOV_MAX):
            chunk = pieces[start : start + IOV_MAX]
            total = sum(len(p) for p in chunk)
            n = os.writev(fd, chunk)
            if n != total:
                self._finish(memoryview(b"".join(chunk))[n:])
            self._size += total
        return self._size

    def append_batch(self, head: Buf, body: Buf, nbytes: int) -> int:
        n = os.writev(self._fd, (head, body))
        if n != nbytes:  # a short write (disk full, signal): finish it or raise
            self._finish(memoryview(b"".join((head, body)))[n:])
        self._size += nbytes
        return self._size

    def _finish(self, rest: memoryview) -> None:
        for _ in range(len(rest) + 1):  # bounded: every round writes >= 1 byte
            if not rest:
                return
            n = os.write(self._fd, rest)
            rest = rest[n:]

    def pread(self, position: int, length: int) -> bytes:
        return os.pread(self._fd, length, position)

    def truncate(self, size: int) -> None:
        os.ftruncate(self._fd, size)
        self._size = size

    def fsync(self) -> None:
        os.fdatasync(self._fd)

    def fileno(self) -> int | None:
        return self._fd

    def release(self) -> None:
        if self._fd >= 0:
            null = os.open(os.devnull, os.O_RDONLY)
            try:
                os.dup2(null, self._fd)
            finally:
                os.close(null)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class RealFS:
    """The operating system's file system."""

    def open(self, path: Path, *, create: bool = False) -> FileHandle:
        flags = os.O_RDWR | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
        if create:
            flags |= os.O_CREAT
        return RealFile(path, os.open(path, flags, 0o644))

    def exists(self, path: Path) -> bool:
        return os.path.exists(path)

    def is_dir(self, path: Path) -> bool:
        return os.path.isdir(path)

    def listdir(self, path: Path) -> list[str]:
        return sorted(os.listdir(path))

    def makedirs(self, path: Path) -> None:
        os.makedirs(path, exist_ok=True)

    def remove(self, path: Path) -> None:
        os.unlink(path)

    def rmdir(self, path: Path) -> None:
        os.rmdir(path)

    def rename(self, src: Path, dst: Path) -> None:
        os.replace(src, dst)

    def fsync_dir(self, path: Path) -> None:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# --------------------------------------------------------------------------------------------
# Simulated file system


@dataclass(eq=False)
class _Inode:
    data: bytearray = field(default_factory=bytearray)  # the page cache: what reads see
    durable: bytes = b""  # what survives a crash


SPLITS_MAX = 4096  # remembered (parent, name) pairs of SimFS paths


class SimulatedCrash(Exception):
    """Raised by SimFS when `crash_after_ops` mutating operations have run (crash injection)."""


@dataclass
class SimStats:
    fsyncs: int = 0
    dir_fsyncs: int = 0
    crashes: int = 0
    bytes_written: int = 0


class SimFile:
    __slots__ = ("_fs", "_generation", "_inode", "path")

    def __init__(self, fs: SimFS, path: Path, inode: _Inode):
        self._fs = fs
        self.path = path
        self._inode = inode
        self._generation = fs.generation

    def _check(self) -> _Inode:
        if self._generation != self._fs.generation:
            raise LogClosedError(f"{self.path}: file handle from before a simulated crash")
        return self._inode

    def size(self) -> int:
        return len(self._check().data)

    def append(self, pieces: Sequence[Buf]) -> int:
        inode = self._check()
        self._fs.tick()
        for piece in pieces:
            inode.data += piece
            self._fs.stats.bytes_written += len(piece)
        return len(inode.data)

    def append_batch(self, head: Buf, body: Buf, nbytes: int) -> int:
        if len(head) + len(body) != nbytes:
            raise ValueError(f"append_batch: {len(head)} + {len(body)} bytes, not {nbytes}")
        return self.append((head, body))

    def pread(self, position: int, length: int) -> bytes:
        data = self._check().data
        if self._fs.short_reads and length > 1:
            length = self._fs.rng.randint(1, length)
        # one copy (slicing the bytearray first would copy twice); a view cannot be handed
        # out: the bytearray could not grow while it lives
        with memoryview(data) as view:
            return bytes(view[position : position + length])

    def truncate(self, size: int) -> None:
        inode = self._check()
        self._fs.tick()
        if size < len(inode.data):
            del inode.data[size:]
        else:
            inode.data += bytes(size - len(inode.data))

    def fsync(self) -> None:
        inode = self._check()
        self._fs.tick()
        inode.durable = bytes(inode.data)
        self._fs.stats.fsyncs += 1

    def fileno(self) -> int | None:
        return None

    def release(self) -> None:
        pass  # no descriptor, no blocks

    def close(self) -> None:
        pass


class SimFS:
    """In-memory file system with a page cache, durable bytes and crashes.

    `crash(lose_unsynced=True, torn=False)`:
      - lose_unsynced=False models a process crash (kill -9): the page cache survives;
      - lose_unsynced=True models a machine crash: each file returns to its durable bytes and each
        directory to its durable entries;
      - torn=True: for each file, a random amount of its unsynced tail survives the crash, and
        sometimes the last part of that surviving tail is garbage (a torn sector write).
    """

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)
        self.generation = 0
        self.short_reads = False
        self.crash_after_ops: int | None = None  # raise SimulatedCrash at that mutating op
        self.stats = SimStats()
        self._dirs: dict[Path, dict[str, _Inode]] = {}
        self._durable_dirs: dict[Path, dict[str, _Inode]] = {}
        self._splits: dict[Path, tuple[Path, str]] = {}
        self._canon: dict[Path, Path] = {}

    def tick(self) -> None:
        """Count a mutating operation; raise SimulatedCrash when the countdown runs out."""
        if self.crash_after_ops is not None:
            if self.crash_after_ops <= 0:
                self.crash_after_ops = None
                raise SimulatedCrash("simulated crash injected by SimFS.crash_after_ops")
            self.crash_after_ops -= 1

    # -- the FS port

    def _split(self, path: Path) -> tuple[Path, str]:
        """(parent, name), remembered: `Path.parent` builds a new Path (and its hash) each
        time, and the store names the same few files over and over."""
        got = self._splits.get(path)
        if got is None:
            if len(self._splits) >= SPLITS_MAX:
                self._splits.clear()
            got = self._splits[path] = (self._canonical(path.parent), path.name)
        return got

    def _canonical(self, path: Path) -> Path:
        """One Path object per directory, the key `_dirs` holds: a dict lookup with the
        very key object skips `Path.__eq__`, which is slow."""
        got = self._canon.setdefault(path, path)
        if len(self._canon) > SPLITS_MAX:
            self._canon.clear()
        return got

    def _dir(self, path: Path) -> dict[str, _Inode]:
        entries = self._dirs.get(path)
        if entries is None:
            raise FileNotFoundError(f"no such directory: {path}")
        return entries

    def _inode(self, path: Path) -> _Inode:
        parent, name = self._split(path)
        inode = self._dir(parent).get(name)
        if inode is None:
            raise FileNotFoundError(f"no such file: {path}")
        return inode

    def open(self, path: Path, *, create: bool = False) -> FileHandle:
        parent, name = self._split(path)
        entries = self._dir(parent)
        inode = entries.get(name)
        if inode is None:
            if not create:
                raise FileNotFoundError(f"no such file: {path}")
            if path in self._dirs:
                raise IsADirectoryError(str(path))
            self.tick()
            inode = entries[name] = _Inode()
        return SimFile(self, path, inode)

    def exists(self, path: Path) -> bool:
        if path in self._dirs:
            return True
        parent, name = self._split(path)
        entries = self._dirs.get(parent)
        return entries is not None and name in entries

    def is_dir(self, path: Path) -> bool:
        return path in self._dirs

    def listdir(self, path: Path) -> list[str]:
        names = set(self._dir(path))
        names.update(d.name for d in self._dirs if d.parent == path and d != path)
        return sorted(names)

    def makedirs(self, path: Path) -> None:
        for p in [*reversed(path.parents), path]:
            p = self._canonical(p)
            if p not in self._dirs:
                self._dirs[p] = {}
                self._durable_dirs[p] = {}

    def remove(self, path: Path) -> None:
        self.tick()
        entries = self._dir(path.parent)
        if path.name not in entries:
            raise FileNotFoundError(f"no such file: {path}")
        del entries[path.name]

    def rmdir(self, path: Path) -> None:
        if self.listdir(path):
            raise OSError(f"directory not empty: {path}")
        del self._dirs[path]
        del self._durable_dirs[path]

    def rename(self, src: Path, dst: Path) -> None:
        self.tick()
        inode = self._inode(src)
        del self._dir(src.parent)[src.name]
        self._dir(dst.parent)[dst.name] = inode

    def fsync_dir(self, path: Path) -> None:
        self.tick()
        self._durable_dirs[path] = dict(self._dir(path))
        self.stats.dir_fsyncs += 1

    # -- faults

    def crash(self, *, lose_unsynced: bool = True, torn: bool = False) -> None:
        """Simulate a crash. Every open handle becomes unusable."""
        self.generation += 1
        self.stats.crashes += 1
        if not lose_unsynced:
            return
        seen: set[int] = set()
        for path in sorted(self._dirs):
            self._dirs[path] = dict(self._durable_dirs[path])
            for name in sorted(self._dirs[path]):
                inode = self._dirs[path][name]
                if id(inode) not in seen:
                    seen.add(id(inode))
                    self._settle(inode, torn)

    def _settle(self, inode: _Inode, torn: bool) -> None:
        data, durable = inode.data, inode.durable
        if not torn or data == durable:
            inode.data = bytearray(durable)
            return
        common = 0
        limit = min(len(data), len(durable))
        while common < limit and data[common] == durable[common]:
            common += 1
        if len(data) < len(durable) and self.rng.random() < 0.5:
            kept = bytearray(durable)  # the truncation never reached the disk
        else:
            kept = bytearray(data[: self.rng.randint(common, len(data))])
            if len(kept) > common and self.rng.random() < 0.3:
                start = self.rng.randint(common, len(kept) - 1)
                for i in range(start, min(len(kept), start + 64)):
                    kept[i] = self.rng.randrange(256)
        inode.data = kept
        inode.durable = bytes(kept)

    def flip_bit(self, path: Path, position: int, bit: int = 0) -> None:
        """Flip one bit in both the page cache and the durable bytes (media corruption)."""
        inode = self._inode(path)
        if position < len(inode.data):
            inode.data[position] ^= 1 << bit
        if position < len(inode.durable):
            durable = bytearray(inode.durable)
            durable[position] ^= 1 << bit
            inode.durable = bytes(durable)

    def durable_size(self, path: Path) -> int:
        return len(self._inode(path).durable)

    def file_bytes(self, path: Path) -> bytes:
        return bytes(self._inode(path).data)
