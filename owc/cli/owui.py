"""``owc owui install|migrate|rollback|status|repair-variants``: owc inside Open WebUI, driven from outside (its
admin API) or on its database (the variant repair)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from owc.cli.codes import (
    EPILOG,
    EXIT_BUSY,
    EXIT_CONFIG,
    EXIT_INVARIANTS,
    EXIT_OK,
    EXIT_UNHEALTHY,
    EXIT_USAGE,
    OWUI_PASSWORD_ENV,
    CliError,
)
from owc.cli.inputs import parse_gateway


def add_parsers(sub: argparse._SubParsersAction) -> None:
    owui = sub.add_parser("owui", help="owc inside Open WebUI")
    owui_sub = owui.add_subparsers(dest="owui_command", metavar="ACTION", required=True)
    inst = owui_sub.add_parser(
        "install",
        help="create or update owc's Functions in a running Open WebUI (keeping their valves), activate them",
    )
    inst.add_argument("--url", required=True, help="Open WebUI's address, e.g. http://localhost:8080")
    inst.add_argument("--admin-email", required=True, help="an Open WebUI admin's email")
    inst.add_argument(
        "--admin-password-file",
        type=Path,
        help=f"file holding the admin's password (else ${OWUI_PASSWORD_ENV}, else a prompt)",
    )
    inst.add_argument("--gateway-url", help="set the Pipe's GATEWAY_URL valve (ws:// or wss://)")
    inst.add_argument("--agent", help="set the Pipe's AGENT_ID valve")
    inst.add_argument(
        "--gateway-token-file", help="set the Pipe's GATEWAY_TOKEN_FILE valve (a path on Open WebUI's host)"
    )
    _owui_migration_parsers(owui_sub)
    rep = owui_sub.add_parser(
        "repair-variants",
        help="put the old Pipe's 1/2 · 2/2 proactive variant groups in one line: on a copy first (a diff of every"
        " chat), then with --apply chat by chat under the row lock, each chat backed up",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rep.add_argument("--db", required=True, help="Open WebUI's database URL (sqlite:///path or postgresql://...)")
    rep.add_argument("--apply", action="store_true", help="after the copy run, repair the database itself")
    rep.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder (made, mode 0700) for the copy, the diff and the backups; default ./owc-repair-<UTC time>",
    )
    rep.add_argument(
        "--restore",
        action="store_true",
        help="instead: put back every chat backed up in --out (an earlier --apply's folder) exactly",
    )
    rep.add_argument(
        "--busy-timeout", type=int, default=5000, metavar="MS", help="wait for a locked chat (default 5000 ms)"
    )


def _owui_connection(p: argparse.ArgumentParser) -> None:
    """The options every ``owc owui`` command that talks to a running Open WebUI takes (``install``'s)."""
    p.add_argument("--url", required=True, help="Open WebUI's address, e.g. http://localhost:8080")
    p.add_argument("--admin-email", required=True, help="an Open WebUI admin's email")
    p.add_argument(
        "--admin-password-file",
        type=Path,
        help=f"file holding the admin's password (else ${OWUI_PASSWORD_ENV}, else a prompt)",
    )


def _owui_migration_parsers(owui_sub: Any) -> None:
    """``owc owui migrate`` / ``rollback`` / ``status`` (issue 30, owc/owui/migrate.py)."""
    backup_help = "folder of the migration backups (default DATA_DIR/owc/owui-backups, else ~/.local/state/owc/...)"
    mig = owui_sub.add_parser(
        "migrate",
        help="replace the old Pipe (openclaw_gateway) by owc in place: backup, valves, its device identity",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _owui_connection(mig)
    mig.add_argument("--dry-run", action="store_true", help="print what it would do; change nothing")
    mig.add_argument("--backup-dir", type=Path, help=backup_help)
    mig.add_argument(
        "--device-dir",
        type=Path,
        help="owc's device folder as Open WebUI sees it (default DATA_DIR/owc when run in Open WebUI's environment;"
        " given, it also goes into the DEVICE_DIR valve)",
    )
    mig.add_argument(
        "--old-state-dir", type=Path, help="where the old Pipe's STATE_DIR is readable here (default: its valve)"
    )
    mig.add_argument(
        "--replace-device", action="store_true", help="put the old device there even if owc has another one"
    )
    rb = owui_sub.add_parser(
        "rollback",
        help="restore the Functions and valves a migration backed up, exactly",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _owui_connection(rb)
    rb.add_argument("--backup-dir", type=Path, help=backup_help + "; the newest backup in it is restored")
    rb.add_argument("--backup", type=Path, help="restore this backup folder instead")
    st = owui_sub.add_parser(
        "status",
        help="owc's Functions, models, Gateway, token, device: one line per check; exit 0 only when all hold",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _owui_connection(st)


def _run_owui_install(args: argparse.Namespace) -> int:
    """``owc owui install``: blocking HTTP to Open WebUI's admin API (owc/owui/install.py), ending with its smoke
    check (said, not an exit code: ``owc owui status`` judges)."""
    from owc.owui.install import InstallError, install, smoke

    valves = {}
    if args.gateway_url:
        valves["GATEWAY_URL"] = parse_gateway(args.gateway_url, "--gateway-url")[0]
    if args.agent:
        valves["AGENT_ID"] = args.agent
    if args.gateway_token_file:
        valves["GATEWAY_TOKEN_FILE"] = args.gateway_token_file
    api = _owui_api(args)
    try:
        smoke(api, install(api, valves=valves))
    except InstallError as exc:
        raise CliError(EXIT_CONFIG, f"owui install: {exc}") from None
    return EXIT_OK


def _owui_api(args: argparse.Namespace) -> Any:
    """Signed in to Open WebUI as ``install`` signs in (the password from a file, the environment or a prompt)."""
    import getpass

    from owc.owui.install import Api, InstallError

    if args.admin_password_file is not None:
        try:
            password = args.admin_password_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise CliError(EXIT_CONFIG, f"cannot read {args.admin_password_file}: {exc.strerror}") from None
    elif os.environ.get(OWUI_PASSWORD_ENV):
        password = os.environ[OWUI_PASSWORD_ENV]
    elif sys.stdin.isatty():
        password = getpass.getpass(f"Open WebUI password for {args.admin_email}: ")
    else:
        raise CliError(EXIT_CONFIG, f"no admin password: pass --admin-password-file FILE or set {OWUI_PASSWORD_ENV}")
    api = Api(args.url)
    try:
        api.sign_in(args.admin_email, password)
    except InstallError as exc:
        raise CliError(EXIT_CONFIG, f"owui {args.owui_command}: {exc}") from None
    return api


def _run_owui_migration(args: argparse.Namespace) -> int:
    """``owc owui migrate`` / ``rollback`` / ``status`` (owc/owui/migrate.py)."""
    from owc.owui import migrate
    from owc.owui.install import InstallError

    api = _owui_api(args)
    try:
        if args.owui_command == "status":
            return EXIT_OK if migrate.status(api) else EXIT_UNHEALTHY
        root = args.backup_dir if args.backup_dir is not None else migrate.default_backup_root()
        if args.owui_command == "rollback":
            migrate.rollback(api, backup=args.backup if args.backup is not None else migrate.latest_backup(root))
            return EXIT_OK
        given = args.device_dir is not None
        migrate.migrate(
            api,
            backup_root=root,
            device_dir=args.device_dir.absolute() if given else migrate.default_device_dir(),
            device_dir_valve=given,
            old_state_dir=args.old_state_dir,
            replace_device=args.replace_device,
            dry_run=args.dry_run,
        )
    except InstallError as exc:
        raise CliError(EXIT_CONFIG, f"owui {args.owui_command}: {exc}") from None
    return EXIT_OK


def _run_repair_variants(args: argparse.Namespace) -> int:
    """``owc owui repair-variants`` (owc/store/repair.py): the copy run and its diff, then ``--apply``; or
    ``--restore``. Exit 1 when a chat was skipped (each named on stderr), 5 when the database stayed locked."""
    import time

    from owc.store import repair

    if args.restore and args.out is None:
        raise CliError(EXIT_USAGE, "--restore needs --out FOLDER (the folder of the --apply to undo)")
    if args.restore and args.apply:
        raise CliError(EXIT_USAGE, "--restore and --apply do not go together")
    folder = args.out or Path(f"owc-repair-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}").absolute()
    try:
        if args.restore:
            results = repair.restore(args.db, folder, busy_timeout_ms=args.busy_timeout)
            for r in results:
                print(f"chat {r.chat_id}: {r.status}{': ' + r.detail if r.detail else ''}")
            left = [r for r in results if r.status != "restored"]
            for r in left:
                print(f"owc: chat {r.chat_id} not restored: {r.detail}", file=sys.stderr)
            return EXIT_INVARIANTS if left else EXIT_OK
        report = repair.run(args.db, folder, apply=args.apply, busy_timeout_ms=args.busy_timeout, progress=print)
    except repair.DatabaseLocked as exc:
        raise CliError(EXIT_BUSY, str(exc)) from None
    except repair.RepairError as exc:
        raise CliError(EXIT_CONFIG, str(exc)) from None
    would = [c for c in report.chats if c.status == "copy"]
    groups = sum(len(c.plan.groups) for c in would if hasattr(c.plan, "groups"))
    kept = sum(len(c.plan.kept) for c in report.chats)
    print(
        f"{len(would)} chat(s) with {groups} old variant group(s) repaired on the copy; {kept} group(s) kept"
        f" (a person's own variants); diff: {report.diff}"
    )
    if args.apply:
        done = [c for c in report.applied if c.status == "applied"]
        print(f"applied: {len(done)} chat(s) repaired; backups in {folder / 'backups'} (one 0600 file a chat)")
    for c in report.refused:
        print(f"owc: chat {c.chat_id} ({c.title!r}) skipped: {c.detail}", file=sys.stderr)
    if report.stopped is not None:
        raise CliError(EXIT_BUSY, report.stopped)
    return EXIT_INVARIANTS if report.refused else EXIT_OK


def run(args: argparse.Namespace) -> int:
    if args.owui_command == "repair-variants":
        return _run_repair_variants(args)
    if args.owui_command in ("migrate", "rollback", "status"):
        return _run_owui_migration(args)
    return _run_owui_install(args)
