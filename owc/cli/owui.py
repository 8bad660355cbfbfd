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
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    OWUI_PASSWORD_ENV,
    CliError,
)
from owc.cli.inputs import parse_gateway

#: The exit codes for ``owc owui``'s commands, without the environment ``owc run`` reads: its line names
#: ``owc run``'s ``--token-file``, which no ``owc owui`` command has (issue 31: the install named it).
OWUI_EPILOG = EPILOG.partition("\nenvironment:")[0].rstrip("\n") + "\n"


def add_parsers(sub: argparse._SubParsersAction) -> None:
    owui = sub.add_parser("owui", help="owc inside Open WebUI")
    owui_sub = owui.add_subparsers(dest="owui_command", metavar="ACTION", required=True)
    inst = owui_sub.add_parser(
        "install",
        help="create or update owc's Functions in a running Open WebUI, their valves and flags; says each change",
        description="Three forms: --config FILE (TOML), --url URL --admin-email EMAIL (with the valve options), or"
        " neither (the environment: OWC_OWUI_URL, ...). --config and the environment never prompt; each says one"
        " line per change, and 'nothing changed' when applied again.",
        epilog=OWUI_EPILOG + INSTALL_ENVIRONMENT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    inst.add_argument("--config", type=Path, metavar="FILE", help="the whole install as TOML (README: the schema)")
    inst.add_argument("--dry-run", action="store_true", help="print the changes it would make; write nothing")
    inst.add_argument("--url", help="Open WebUI's address, e.g. http://localhost:8080 (else OWC_OWUI_URL)")
    inst.add_argument("--admin-email", help="an Open WebUI admin's email (with --url)")
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
    inst.add_argument(
        "--wait",
        type=float,
        metavar="SECONDS",
        help="wait up to this long for Open WebUI to answer (its /ready route) before giving up with exit"
        f" {EXIT_UNREACHABLE}; default: the configuration's openwebui.wait, OWC_OWUI_WAIT, else 0 (one attempt)",
    )
    inst.add_argument(
        "--connect-wait",
        type=float,
        metavar="SECONDS",
        help="wait up to this long for owc to connect to the Gateway (its hello) before listing the models;"
        " default: openwebui.connect_wait, OWC_OWUI_CONNECT_WAIT, else 20",
    )
    _owui_migration_parsers(owui_sub)
    rep = owui_sub.add_parser(
        "repair-variants",
        help="put the old Pipe's 1/2 · 2/2 proactive variant groups in one line: on a copy first (a diff of every"
        " chat), then with --apply chat by chat under the row lock, each chat backed up",
        epilog=OWUI_EPILOG,
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
        epilog=OWUI_EPILOG,
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
        epilog=OWUI_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _owui_connection(rb)
    rb.add_argument("--backup-dir", type=Path, help=backup_help + "; the newest backup in it is restored")
    rb.add_argument("--backup", type=Path, help="restore this backup folder instead")
    st = owui_sub.add_parser(
        "status",
        help="owc's Functions, models, Gateway, token, device: one line per check; exit 0 only when all hold",
        epilog=OWUI_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _owui_connection(st)


#: ``owc owui install``'s environment form, in its ``--help``.
INSTALL_ENVIRONMENT = f"""
owc owui install's environment (used when neither --config nor --url is given; README: the full list):
  OWC_OWUI_URL, OWC_OWUI_ADMIN_EMAIL     Open WebUI's address and an admin's email
  OWC_OWUI_ADMIN_PASSWORD_FILE           a file holding the admin's password (or {OWUI_PASSWORD_ENV})
  OWC_OWUI_WAIT, OWC_OWUI_CONNECT_WAIT   seconds, as --wait and --connect-wait
  OWC_VALVE_<NAME>=VALUE                 the Pipe's valve NAME (e.g. OWC_VALVE_GATEWAY_URL)
  OWC_VALVE_FILE_<NAME>=PATH             the Pipe's valve NAME from a file (a secret: OWC_VALVE_FILE_GATEWAY_TOKEN)
  OWC_FUNCTION_<F>_ACTIVE=true|false     F: PIPE, STARTUP, THINKING, STATUS (default: true)
  OWC_FUNCTION_<F>_GLOBAL=true|false     F: THINKING, STATUS (default: left as it is)
  OWC_FUNCTION_<F>_VALVE_<NAME>=VALUE    F: THINKING, STATUS (e.g. OWC_FUNCTION_THINKING_VALVE_PRIORITY)
  OWC_FUNCTION_PIPE_ID=ID                the Pipe's Function id (default openclaw; openclaw_gateway after migrate)
"""


def _run_owui_install(args: argparse.Namespace) -> int:
    """``owc owui install``: the spec from ``--config``, the options or the environment (owc/owui/install_config.py),
    then waiting for Open WebUI, signing in and applying it (owc/owui/install.py), ending with its smoke check
    (said, not an exit code: ``owc owui status`` judges)."""
    from owc.owui import install_config as cfg
    from owc.owui.install import (
        Api,
        InstallError,
        OpenWebUIUnreachable,
        apply,
        install_and_check,
        wait_for_open_webui,
    )

    try:
        spec = _install_spec(args)
    except cfg.ConfigUsageError as exc:
        raise CliError(EXIT_USAGE, f"owui install: {exc}") from None
    except cfg.ConfigFileError as exc:
        raise CliError(EXIT_CONFIG, f"owui install: {exc}") from None
    connection = spec.connection
    overrides = {}
    for option, field in (("wait", "wait_s"), ("connect_wait", "connect_wait_s")):
        value = getattr(args, option)
        if value is not None:
            if not 0 <= value <= cfg.MAX_WAIT_S:
                flag = "--" + option.replace("_", "-")
                raise CliError(EXIT_USAGE, f"owui install: {flag} must be between 0 and {cfg.MAX_WAIT_S:g} seconds")
            overrides[field] = value
    if overrides:
        import attrs

        spec = attrs.evolve(spec, connection=attrs.evolve(connection, **overrides))
        connection = spec.connection
    api = Api(connection.url)
    try:
        wait_for_open_webui(api, connection.wait_s)
        api.sign_in(connection.admin_email, connection.admin_password)
        if args.config is None and args.url is not None and not args.dry_run:
            # The command-line form as it was (W tier: its second run says each Function "updated in place").
            pipe = next(f for f in spec.functions if f.section.table == "pipe")
            install_and_check(api, valves=pipe.valves, connect_wait_s=connection.connect_wait_s)
        else:
            apply(api, spec, dry_run=args.dry_run)
    except OpenWebUIUnreachable as exc:
        raise CliError(EXIT_UNREACHABLE, f"owui install: {exc}") from None
    except InstallError as exc:
        raise CliError(EXIT_CONFIG, f"owui install: {exc}") from None
    return EXIT_OK


#: The options the command-line form has and ``--config`` holds instead.
_OPTION_FORM = ("url", "admin_email", "admin_password_file", "gateway_url", "agent", "gateway_token_file")


def _install_spec(args: argparse.Namespace) -> Any:
    """Which form: ``--config FILE``, else ``--url`` (the options), else the environment."""
    from owc.owui import install_config as cfg

    if args.config is not None:
        given = [name for name in _OPTION_FORM if getattr(args, name) is not None]
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise cfg.ConfigUsageError(f"{flag} does not go with --config (the file holds the whole install)")
        return cfg.load_toml(args.config)
    if args.url is None:
        for name in _OPTION_FORM[1:]:
            if getattr(args, name) is not None:
                flag = "--" + name.replace("_", "-")
                raise cfg.ConfigUsageError(f"{flag} needs --url (or set OWC_OWUI_URL and leave the options out)")
        return cfg.from_environ(os.environ)
    if not args.admin_email:
        raise cfg.ConfigUsageError("--url needs --admin-email EMAIL (an Open WebUI admin)")
    valves: dict[str, Any] = {}
    if args.gateway_url:
        valves["GATEWAY_URL"] = parse_gateway(args.gateway_url, "--gateway-url")[0]
    if args.agent:
        valves["AGENT_ID"] = args.agent
    if args.gateway_token_file:
        valves["GATEWAY_TOKEN_FILE"] = args.gateway_token_file
    return cfg.from_options(url=args.url, admin_email=args.admin_email, admin_password=_password(args), valves=valves)


def _password(args: argparse.Namespace) -> str:
    """The admin's password: from a file, the environment, or (at a terminal only) a prompt."""
    import getpass

    if args.admin_password_file is not None:
        try:
            return args.admin_password_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise CliError(EXIT_CONFIG, f"cannot read {args.admin_password_file}: {exc.strerror}") from None
    if os.environ.get(OWUI_PASSWORD_ENV):
        return os.environ[OWUI_PASSWORD_ENV]
    if sys.stdin.isatty():
        return getpass.getpass(f"Open WebUI password for {args.admin_email}: ")
    raise CliError(EXIT_CONFIG, f"no admin password: pass --admin-password-file FILE or set {OWUI_PASSWORD_ENV}")


def _owui_api(args: argparse.Namespace) -> Any:
    """Signed in to Open WebUI as ``install`` signs in (the password from a file, the environment or a prompt)."""
    from owc.owui.install import Api, InstallError

    password = _password(args)
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
