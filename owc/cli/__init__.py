"""The ``owc`` command, one module a command (each adds its own parser and runs it):

* ``owc demo`` / ``owc scenario run FILE --db URL`` (``play``): a scenario played through owc into a database.
* ``owc run`` / ``owc doctor`` (``bridge``): owc as a standalone bridge to a real Gateway; one connect, a report.
* ``owc sim`` (``sim``): the Gateway simulator, standalone.
* ``owc device`` (``device``): the device identity.
* ``owc owui ...`` (``owui``): install, migrate, rollback, status, repair-variants.

``codes`` holds the exit codes and ``CliError``; ``inputs`` checks what the person gave; ``main`` is the entry point.
"""

from owc.cli.codes import (
    EXIT_BUSY,
    EXIT_CONFIG,
    EXIT_INVARIANTS,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNHEALTHY,
    EXIT_USAGE,
    OWUI_PASSWORD_ENV,
    TOKEN_ENV,
    CliError,
)
from owc.cli.main import build_parser, main

__all__ = [
    "EXIT_BUSY",
    "EXIT_CONFIG",
    "EXIT_INVARIANTS",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_UNHEALTHY",
    "EXIT_USAGE",
    "OWUI_PASSWORD_ENV",
    "TOKEN_ENV",
    "CliError",
    "build_parser",
    "main",
]
