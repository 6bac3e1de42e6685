"""Packing job inputs and unpacking outputs: the deterministic tar streams
of internal/seal (PackFiles, UnpackDir). Entries are in tree order, mtime
0, uid/gid 0, mode 0755 for directories and executables, else 0644; only
regular files and directories. Unpacking refuses anything that would write
outside the destination, links, devices and duplicate names."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from typing import BinaryIO, Iterable, Mapping

from .errors import Error

DEFAULT_MAX_BYTES = 16 << 30
DEFAULT_MAX_ENTRIES = 100_000
_MAX_TRAILING = 64 << 10


class PackError(Error):
    """A file cannot be packed, or an archive is refused."""


def _archive_path(ap: str) -> str:
    if ap == "":
        raise PackError('empty archive path; want a path such as "/in/input.txt"')
    if "\x00" in ap or "\\" in ap:
        raise PackError(f"archive path {ap!r}: contains a NUL or a backslash")
    if ".." in ap.split("/"):
        raise PackError(f'archive path {ap!r}: contains ".."')
    import posixpath
    c = posixpath.normpath("/" + ap)
    return c.lstrip("/")


def _key(name: str) -> list[bytes]:
    return [p.encode("utf-8", "surrogateescape") for p in name.split("/")]


def _header(ti: tarfile.TarInfo) -> bytes:
    """ti's USTAR header as Go's archive/tar writes it: devmajor and
    devminor written as zeros (tarfile leaves them empty), checksum
    recomputed."""
    try:
        h = bytearray(ti.tobuf(tarfile.USTAR_FORMAT, "utf-8", "surrogateescape"))
    except ValueError as e:
        raise PackError(f"pack: {ti.name}: {e}") from None
    h[329:345] = b"0000000\x000000000\x00"
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\x00 " % sum(h)
    return bytes(h)


def pack_files(w: BinaryIO, files: Mapping[str, str]) -> None:
    """Writes host files and directories to w at the archive paths that key
    files ({"/in/input.txt": "./input.txt"}), as seal.PackFiles does."""
    import posixpath
    by_name: dict[str, tuple[bool, str | None, bool]] = {}  # name → (dir, host file, exec)

    def add(name: str, is_dir: bool, host: str | None, ex: bool, src: str) -> None:
        old = by_name.get(name)
        if old is not None:
            if old[0] and is_dir:
                return
            raise PackError(f"archive path {'/' + name!r} would come from two sources (one is {src})")
        by_name[name] = (is_dir, host, ex)

    for ap in sorted(files):
        src = os.fspath(files[ap])
        name = _archive_path(ap)
        try:
            info = os.stat(src)
        except OSError as e:
            raise PackError(f"pack: {src}: {e.strerror}") from None
        entries = []
        if stat.S_ISDIR(info.st_mode):
            if name:
                entries.append((name, True, None, False, src))
            for root, dirs, fnames in os.walk(src):
                rel = os.path.relpath(root, src)
                for d in list(dirs):
                    hp = os.path.join(root, d)
                    if os.path.islink(hp):
                        raise PackError(f"pack: {hp} is a symlink; only regular files and directories can be packed")
                    entries.append((posixpath.join(name, rel.replace(os.sep, "/"), d) if rel != "." else posixpath.join(name, d), True, None, False, hp))
                for fn in fnames:
                    hp = os.path.join(root, fn)
                    st = os.lstat(hp)
                    if not stat.S_ISREG(st.st_mode):
                        raise PackError(f"pack: {hp} is not a regular file; only regular files and directories can be packed")
                    an = posixpath.join(name, rel.replace(os.sep, "/"), fn) if rel != "." else posixpath.join(name, fn)
                    entries.append((an, False, hp, bool(st.st_mode & 0o100), hp))
        elif stat.S_ISREG(info.st_mode):
            if not name:
                raise PackError(f"pack: {src} is a file; it needs an archive path below the root, not {ap!r}")
            entries.append((name, False, src, bool(info.st_mode & 0o100), src))
        else:
            raise PackError(f"pack: {src} is not a regular file or a directory")
        p = posixpath.dirname(name)
        while name and p not in ("", "."):
            add(p, True, None, False, "the parent of " + src)
            p = posixpath.dirname(p)
        for e in entries:
            add(*e)
    # Written by hand rather than with tarfile's writer, which pads the
    # archive to 10 KiB records: Go's archive/tar ends it with two zero
    # blocks, and equal trees must give equal bytes in both.
    for name in sorted(by_name, key=_key):
        is_dir, host, ex = by_name[name]
        ti = tarfile.TarInfo(name + "/" if is_dir else name)
        ti.mtime, ti.uid, ti.gid, ti.uname, ti.gname = 0, 0, 0, "", ""
        if is_dir:
            ti.type, ti.mode = tarfile.DIRTYPE, 0o755
            w.write(_header(ti))
            continue
        ti.mode = 0o755 if ex else 0o644
        with open(host, "rb") as f:
            ti.size = os.fstat(f.fileno()).st_size
            w.write(_header(ti))
            left = ti.size
            while left > 0:
                b = f.read(min(left, 1 << 16))
                if not b:
                    raise PackError(f"pack: {host} shrank while being packed")
                w.write(b)
                left -= len(b)
        if ti.size % 512:
            w.write(b"\x00" * (512 - ti.size % 512))
    w.write(b"\x00" * 1024)


def unpack_dir(r: BinaryIO, dest: str, max_bytes: int = DEFAULT_MAX_BYTES, max_entries: int = DEFAULT_MAX_ENTRIES) -> list[str]:
    """Extracts a packed stream into dest (created if missing) under the
    limits, and returns the names of the files written."""
    if max_bytes <= 0 or max_entries <= 0:
        raise PackError("limits must be positive")
    os.makedirs(dest, exist_ok=True)
    root = os.path.realpath(dest)
    tr = tarfile.open(fileobj=r, mode="r|")
    seen: set[str] = set()
    written: list[str] = []
    total = 0
    import posixpath
    for n, ti in enumerate(tr):
        if n >= max_entries:
            raise PackError(f"unpack: archive exceeds limit: more than {max_entries} entries")
        raw = ti.name
        if raw == "" or "\x00" in raw:
            raise PackError(f"unpack: entry {raw!r}: bad name")
        if raw.startswith("/"):
            raise PackError(f"unpack: entry {raw!r}: absolute path")
        if ".." in raw.split("/"):
            raise PackError(f'unpack: entry {raw!r}: path contains ".."')
        name = posixpath.normpath(raw)
        if name in seen:
            raise PackError(f"unpack: entry {raw!r} appears twice")
        seen.add(name)
        target = os.path.join(root, *name.split("/")) if name != "." else root
        # Refuse to follow a symlink already in dest out of it.
        parent = os.path.realpath(os.path.dirname(target))
        if parent != root and not parent.startswith(root + os.sep):
            raise PackError(f"unpack: entry {raw!r} would be written outside {dest}")
        if ti.isdir():
            if name != ".":
                os.makedirs(target, exist_ok=True)
            continue
        if not ti.isreg():
            raise PackError(f"unpack: entry {raw!r} is not a regular file or a directory")
        if name == ".":
            raise PackError(f"unpack: file entry {raw!r} has no name")
        if ti.size > max_bytes - total:
            raise PackError(f"unpack: archive exceeds limit: entry {raw!r} ({ti.size} bytes) would take the total past {max_bytes} bytes")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.islink(target):
            os.remove(target)
        mode = 0o755 if ti.mode & 0o100 else 0o644
        f = tr.extractfile(ti)
        with open(target, "wb") as out:
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                out.write(b)
        os.chmod(target, mode)
        total += ti.size
        written.append(name)
    # Read to the end so that an authenticated stream is checked to its end.
    n = 0
    while True:
        b = r.read(1 << 16)
        if not b:
            break
        n += len(b)
        if n > _MAX_TRAILING:
            raise PackError(f"unpack: more than {_MAX_TRAILING} bytes of data after the end of the archive")
    return written
