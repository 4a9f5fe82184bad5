"""One-line errors (exit 3) without starting Spark: no Java, an unreachable master."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.analysis import main
from harness.analysis import spark as sp


def test_unreachable_master_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([tmp_path], tmp_path / "out", master="spark://127.0.0.1:1") == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unreachable" in err[0]


def test_missing_java_exits_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    monkeypatch.setattr(sp.glob, "glob", lambda _p: [])
    monkeypatch.setattr(sp.shutil, "which", lambda _n: None)
    assert main([tmp_path], tmp_path / "out") == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Java not found" in err[0]


def test_java_found() -> None:
    home = sp.find_java_home()
    assert Path(home, "bin", "java").exists()
