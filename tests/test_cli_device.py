"""``owc device show|export|import`` (issue 15): the identity a person pairs, moved into a rebuilt container."""

from __future__ import annotations

import json
from pathlib import Path

from owc import device
from owc.cli import EXIT_CONFIG, EXIT_OK, main


def test_show_export_import_round_trip_and_show_never_prints_the_key(tmp_path: Path, capsys) -> None:
    assert main(["device", "show", "--dir", str(tmp_path / "a")]) == EXIT_OK
    shown = json.loads(capsys.readouterr().out)
    identity = device.load(tmp_path / "a")
    assert identity is not None and shown["device_id"] == identity.device_id
    assert set(shown) == {"device_id", "public_key", "device_token_stored"}
    assert main(["device", "export", "--dir", str(tmp_path / "a")]) == EXIT_OK
    out = capsys.readouterr()
    assert "password" in out.err  # the export says it is a secret
    (tmp_path / "x").write_text(out.out)
    assert main(["device", "import", "--dir", str(tmp_path / "b"), "--file", str(tmp_path / "x")]) == EXIT_OK
    imported = json.loads(capsys.readouterr().out)
    assert imported["device_id"] == identity.device_id
    assert out.out.strip() not in json.dumps(imported)  # the summary holds nothing of the secret


def test_import_over_another_identity_is_refused_without_replace(tmp_path: Path, capsys) -> None:
    main(["device", "show", "--dir", str(tmp_path / "a")])
    main(["device", "show", "--dir", str(tmp_path / "b")])
    capsys.readouterr()
    main(["device", "export", "--dir", str(tmp_path / "a")])
    (tmp_path / "x").write_text(capsys.readouterr().out)
    assert main(["device", "import", "--dir", str(tmp_path / "b"), "--file", str(tmp_path / "x")]) == EXIT_CONFIG
    assert (
        "owc:" in capsys.readouterr().err
        and device.load(tmp_path / "b").device_id != device.load(tmp_path / "a").device_id
    )
    assert main(["device", "import", "--dir", str(tmp_path / "b"), "--file", str(tmp_path / "x"), "--replace"]) == 0
    assert device.load(tmp_path / "b").device_id == device.load(tmp_path / "a").device_id
