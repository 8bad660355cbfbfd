"""What the commands read from the person running them, each checked before anything starts: a token file, a
scenario file, a database URL, a Gateway URL. A value owc cannot use is a ``CliError`` naming the fix."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from owc.cli.codes import EXIT_CONFIG, EXIT_USAGE, TOKEN_ENV, CliError, first_line, leaves


def read_token(path: Path) -> str:
    """The token in ``path``; its warnings (group/world readable, a symbolic link) go to stderr, one line
    each. A missing, unreadable or empty file is a configuration error."""
    from owc.tokenfile import TokenFileError, read_token_file

    try:
        token = read_token_file(path)
    except TokenFileError as exc:
        raise CliError(EXIT_CONFIG, str(exc)) from None
    for warning in token.warnings:
        print(f"owc: warning: {warning}", file=sys.stderr, flush=True)
    return token.value


def port_number(text: str) -> int:
    """``--port``'s type: a TCP port, 0 to 65535 (0: the system picks a free one). Checked while parsing: a port
    out of range was taken modulo 65536 by the system (70000 listened on 4464)."""
    try:
        port = int(text, 10)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: a number from 0 to 65535 (0 picks a free one)")
    return port


def read_scenario(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(EXIT_USAGE, f"{path}: {getattr(exc, 'strerror', None) or exc}") from None


def check_database(url: str, *, create: bool = False) -> None:
    """Connect to the database once before anything else starts, and look at its tables: a URL owc cannot use
    (unsupported, malformed, in memory, unreachable, a file that cannot be opened, a driver not installed) or a
    database that is not Open WebUI's (``owc.store.schema.schema_problem``) is a configuration error, in one line
    (redacted: a database URL may hold a password). A SQLite file that does not exist is refused without being
    made, unless ``create``: a typo must not become a new, empty database. With ``create`` the tables are left to
    ``open_store``: two processes starting at once may race to create them, which is no configuration error."""
    from sqlalchemy import inspect, text
    from sqlalchemy.exc import SQLAlchemyError

    from owc.store import REQUIRED_COLUMNS, make_engine, schema_problem
    from owc.store.engine import sqlite_path

    try:
        path = sqlite_path(url)
        if path is not None and not create and not os.path.lexists(path):
            raise CliError(
                EXIT_CONFIG,
                f"{_shown(url)}: no such file {path}: point --db at the database Open WebUI uses (its"
                " DATA_DIR/webui.db), or pass --create-db to make a new one",
            )
        engine = make_engine(url)
    except ImportError as exc:
        raise _driver_missing(url, exc) from None
    except (ValueError, SQLAlchemyError) as exc:
        raise database_error(url, exc) from None
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
            found = inspect(conn)
            tables = {
                name: frozenset(c["name"] for c in found.get_columns(name)) if name in REQUIRED_COLUMNS else frozenset()
                for name in found.get_table_names()
            }
    except ImportError as exc:
        raise _driver_missing(url, exc) from None
    except SQLAlchemyError as exc:
        raise database_error(url, exc) from None
    finally:
        engine.dispose()
    problem = schema_problem(tables, create=create)
    if problem is not None:
        raise CliError(EXIT_CONFIG, f"{_shown(url)}: {problem}")


def _shown(url: str) -> str:
    from owc.gateway.url import redact_url

    return f"database {redact_url(url)}"


def _driver_missing(url: str, exc: ImportError) -> CliError:
    """A PostgreSQL URL without psycopg installed: the extra that brings it."""
    name = getattr(exc, "name", None) or str(exc)
    if "psycopg" in name:
        return CliError(
            EXIT_CONFIG,
            f"{_shown(url)}: the PostgreSQL driver psycopg is not installed: pip install 'owc[postgres]'"
            " (in owc's virtual environment)",
        )
    return database_error(url, exc)


@contextmanager
def database_errors(url: str) -> Iterator[None]:
    """A database error that escapes ``owc run`` (creating the tables at start: a missing privilege, a
    read-only file) is the database's configuration; a writer's own errors never escape (they are its run's)."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        yield
    except SQLAlchemyError as exc:
        raise database_error(url, exc) from None
    except BaseExceptionGroup as group:
        matched, rest = group.split(SQLAlchemyError)
        if matched is None:
            raise
        if rest is not None:
            raise
        raise database_error(url, leaves(matched)[0]) from None


def database_error(url: str, exc: BaseException) -> CliError:
    return CliError(EXIT_CONFIG, f"{_shown(url)}: {first_line(getattr(exc, 'orig', None) or exc)}")


def parse_gateway(text: str, flag: str) -> tuple[str, str]:
    """The Gateway URL from what was pasted (``https://host``, ``host:port``, a bare host: ``parse_gateway_url``),
    and the form of it that may be shown. One that cannot work, or that holds a credential (userinfo, a ``token=``
    parameter), is a configuration error: a token in a URL ends up in shell history, process lists and proxy
    logs; it belongs in the token file."""
    from owc.gateway.url import InvalidGatewayUrl, parse_gateway_url, redact_url, url_credentials

    try:
        url = parse_gateway_url(text, source=flag)
    except InvalidGatewayUrl as exc:
        raise CliError(EXIT_CONFIG, str(exc)) from None
    found = url_credentials(url)
    if found:
        raise CliError(
            EXIT_CONFIG,
            f"{flag} {redact_url(url)} holds a credential ({', '.join(found)}): remove it from the URL and put"
            f" the token in a file passed with --token-file (mode 0600), or in {TOKEN_ENV}",
        )
    return url, redact_url(url)
