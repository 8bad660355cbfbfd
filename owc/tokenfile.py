"""The Gateway's shared token on disk: read it with a warning when others can read it, write a new one only
where nobody else can have prepared the file.

A token file is a secret: ``owc run`` reads it (and says so when its mode lets the group or others in, or when
it is a symbolic link, whose target someone else may control); ``owc sim`` writes a generated one with
``O_CREAT | O_EXCL | O_NOFOLLOW`` and mode 0600, so an existing file never keeps its looser mode and a planted
symbolic link is never followed. No message here ever holds the token itself.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import attrs

#: A token longer than this is not a token (the Gateway's pre-auth frame limit is 64 KiB).
MAX_TOKEN_BYTES = 65_536

_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class TokenFileError(Exception):
    """The token file cannot be used; the message says why in one line (and never holds the token)."""


@attrs.frozen
class Token:
    """A token read from a file, and what the reader should be told about the file (one line each)."""

    value: str = attrs.field(repr=False)
    warnings: tuple[str, ...] = ()


def read_token_file(path: Path, setting: str = "--token-file") -> Token:
    """The stripped first-and-only content of ``path``. Raises ``TokenFileError`` when it is missing,
    unreadable, not a regular file, too large or empty; warns (in ``Token.warnings``) when the group or others
    may access it, or when it is a symbolic link. ``setting``: where the path was given, as the warning names it
    (the command line's flag, or the Pipe's valve or variable inside Open WebUI)."""
    warnings: list[str] = []
    try:
        if path.is_symlink():
            warnings.append(
                f"token file {path} is a symbolic link (to {os.readlink(path)}): whoever controls its target "
                f"controls owc's token; point {setting} at a regular file"
            )
        # O_NONBLOCK: a FIFO planted as the token file must not hang owc (no effect on a regular file).
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise TokenFileError(f"token file {path}: no such file") from None
    except PermissionError:
        raise TokenFileError(f"token file {path}: permission denied") from None
    except OSError as exc:
        raise TokenFileError(f"token file {path}: {exc.strerror or exc}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise TokenFileError(f"token file {path}: not a regular file")
    with os.fdopen(fd, "rb") as fh:
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            warnings.append(f"token file {path} is accessible by group or others (mode {mode:04o}): chmod 600 {path}")
        try:
            data = fh.read(MAX_TOKEN_BYTES + 1)
        except OSError as exc:
            raise TokenFileError(f"token file {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_TOKEN_BYTES:
        raise TokenFileError(f"token file {path}: larger than {MAX_TOKEN_BYTES} bytes, not a token")
    try:
        value = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise TokenFileError(f"token file {path}: not UTF-8 text") from None
    if not value:
        raise TokenFileError(f"token file {path}: empty")
    return Token(value, tuple(warnings))


def write_new_token_file(path: Path, token: str) -> None:
    """Write ``token`` to ``path``, created exclusively with mode 0600 and without following a symbolic link.

    An existing regular file owned by this user (a previous ``owc sim``'s) is removed and created anew, so its
    old mode never survives; anything else there (a symbolic link, another user's file, a directory) is
    refused: owc writes a secret only into a file it has just created itself. A file planted between the
    removal and the creation makes the exclusive create fail, which is refused too."""
    try:
        fd = os.open(path, _CREATE_FLAGS, 0o600)
    except FileExistsError:
        _remove_own_file(path)
        try:
            fd = os.open(path, _CREATE_FLAGS, 0o600)
        except FileExistsError:
            raise TokenFileError(f"token file {path}: appeared again while owc replaced it; not written") from None
        except OSError as exc:
            raise TokenFileError(f"token file {path}: {exc.strerror or exc}") from None
    except OSError as exc:
        # O_NOFOLLOW on a symbolic link in the last component fails with ELOOP on some systems.
        raise TokenFileError(f"token file {path}: {exc.strerror or exc}; not written") from None
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")


def _remove_own_file(path: Path) -> None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise TokenFileError(
            f"token file {path} is a symbolic link: owc will not write a token through it (remove it, or pass "
            "--token-file)"
        )
    if not stat.S_ISREG(info.st_mode):
        raise TokenFileError(f"token file {path} exists and is not a regular file; not written")
    if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
        raise TokenFileError(
            f"token file {path} belongs to another user; not written (remove it, or pass --token-file)"
        )
    try:
        os.unlink(path)
    except OSError as exc:
        raise TokenFileError(f"token file {path}: cannot replace it: {exc.strerror or exc}") from None
