"""What every ``owc`` command shares: its exit codes, the environment variables it reads, the epilog that
documents both, and ``CliError``, a failure the user can fix (``main`` prints its one line and exits with its code)."""

from __future__ import annotations

EXIT_OK = 0
#: A scenario or the demo found an ended run's message unfinished, or a run that showed something without one.
EXIT_INVARIANTS = 1
#: Bad arguments, a scenario file that cannot be read or parsed, a scenario error found while playing.
EXIT_USAGE = 2
#: The token file, the database URL (or a database that is not Open WebUI's), the Gateway URL, TLS flags on ws://,
#: an unusable device folder, an address to listen on, a file ``owc demo`` will not replace.
EXIT_CONFIG = 3
#: The Gateway refused the connection: a wrong token, missing scopes, a protocol mismatch; ``owc doctor``: any
#: problem it reports (unreachable, not a WebSocket, waiting for approval).
EXIT_REFUSED = 4
#: ``owc owui repair-variants``: the database stayed locked past the busy wait (another writer held it).
EXIT_BUSY = 5
#: ``owc owui status``: a check does not hold (its ``NO`` line says which).
EXIT_UNHEALTHY = 6
#: ``owc owui install``: Open WebUI did not answer within ``--wait`` (a deploy job may retry; nothing was written).
EXIT_UNREACHABLE = 7

#: ``owc run``'s token when ``--token-file`` is not given.
TOKEN_ENV = "OWC_GATEWAY_TOKEN"
#: ``owc owui install``'s admin password when ``--admin-password-file`` is not given.
OWUI_PASSWORD_ENV = "OWC_OWUI_ADMIN_PASSWORD"

EPILOG = f"""\
exit codes:
  {EXIT_OK}      done (owc run and owc sim: stopped by Ctrl-C or SIGTERM, however many arrive)
  {EXIT_INVARIANTS}      invariants violated: the scenario or demo left an ended run's message unfinished, or
         a run that showed something has no message
  {EXIT_USAGE}      usage or scenario error: bad arguments, a scenario file that cannot be read or parsed, a
         scenario error found while playing
  {EXIT_CONFIG}      configuration error: the token file (missing, unreadable, empty), the database URL or
         a database that is not Open WebUI's (owc run: --create-db makes one), the Gateway URL (not
         ws:// or wss://, or holding a credential), --tls-pin / --ca-file with ws://, a device folder
         owc cannot write (--device-dir / --no-device), an address to listen on, a file owc demo
         will not replace
  {EXIT_REFUSED}      the Gateway refused the connection: a wrong token, missing scopes, a protocol mismatch;
         owc doctor: any problem its status line names (unreachable, an HTTP server that is not
         the Gateway's WebSocket, a device waiting for approval)
  {EXIT_BUSY}      owc owui repair-variants: the database stayed locked past the busy wait; nothing more was
         written (run the same command again)
  {EXIT_UNHEALTHY}      owc owui status: a check does not hold (its NO line says which); owc status: owc is not
         connected to its Gateway (the gateway line says why)
  {EXIT_UNREACHABLE}      owc owui install: Open WebUI did not answer within --wait; nothing was written (retry)
  128+N  owc demo / owc scenario run stopped by signal N before the end (130: Ctrl-C)

environment:
  {TOKEN_ENV}  the Gateway's shared token for owc run when --token-file is not given
"""


class CliError(Exception):
    """A failure the user can fix: ``main`` prints ``owc: <message>`` on stderr and exits with ``code``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc``, however deeply grouped (a nursery reports its failures as a group)."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def first_line(exc: BaseException) -> str:
    """An exception's first line, capped: what a one-line error may quote of it."""
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
