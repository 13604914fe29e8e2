"""Base-image inputs that need no engine: apt sources, mirror choice, suite/python rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinwheel.image.base import BaseImageError, apt_sources, base_ref, debian_mirror, ensure_base, suite_for_python


def _apt_dir(tmp_path: Path, one_line: str = "", deb822: str = "") -> Path:
    apt = tmp_path / "apt"
    (apt / "sources.list.d").mkdir(parents=True)
    (apt / "sources.list").write_text(one_line)
    if deb822:
        (apt / "sources.list.d" / "debian.sources").write_text(deb822)
    (apt / "sources.list.d" / "other.sources.disabled").write_text("Types: deb\nURIs: http://ignored.invalid\nSuites: bookworm\n")
    return apt


DEB822 = """\
Types: deb
URIs: http://vendor.invalid/node
Suites: nodistro
Components: main

Types: deb
# a comment line
URIs: http://archive.invalid/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://archive.invalid/debian-security
Suites: bookworm-security
Components: main
"""


def test_deb822_picks_the_archive_for_the_suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PINWHEEL_DEBIAN_MIRROR", raising=False)
    apt = _apt_dir(tmp_path, deb822=DEB822)
    assert len(apt_sources(apt)) == 3
    assert debian_mirror("bookworm", apt) == (
        "http://archive.invalid/debian",
        "/usr/share/keyrings/debian-archive-keyring.gpg",
    )


def test_one_line_sources_with_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PINWHEEL_DEBIAN_MIRROR", raising=False)
    apt = _apt_dir(
        tmp_path,
        one_line=(
            "# comment\n"
            "deb-src http://src.invalid/debian bookworm main\n"
            "deb http://archive.invalid/debian-security bookworm-security main\n"
            "deb [arch=amd64 signed-by=/k.gpg] http://archive.invalid/debian/ bookworm main contrib\n"
        ),
    )
    assert debian_mirror("bookworm", apt) == ("http://archive.invalid/debian", "/k.gpg")


def test_other_suite_falls_back_to_a_known_debian_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PINWHEEL_DEBIAN_MIRROR", raising=False)
    apt = _apt_dir(tmp_path, deb822=DEB822)
    assert debian_mirror("trixie", apt)[0] == "http://archive.invalid/debian"


def test_no_debian_entry_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PINWHEEL_DEBIAN_MIRROR", raising=False)
    apt = _apt_dir(tmp_path, one_line="deb http://vendor.invalid/x nodistro main\n")
    with pytest.raises(BaseImageError, match="PINWHEEL_DEBIAN_MIRROR"):
        debian_mirror("bookworm", apt)


def test_suite_python_rules() -> None:
    assert base_ref("bookworm", "3.11") == "pinwheel/base:bookworm-py311"
    assert base_ref("trixie", "3.13.5") == "pinwheel/base:trixie-py313"
    assert suite_for_python("3.13") == "trixie"
    with pytest.raises(BaseImageError, match=r"bookworm ships Python 3\.11, not 3\.13.*trixie"):
        ensure_base("pinwheel/base:x", "3.13", engine=None, suite="bookworm", cache_dir=Path("unused"))  # type: ignore[arg-type]
    with pytest.raises(BaseImageError, match="no known Debian suite ships Python 3.12"):
        ensure_base("pinwheel/base:x", "3.12", engine=None, suite="bookworm", cache_dir=Path("unused"))  # type: ignore[arg-type]
