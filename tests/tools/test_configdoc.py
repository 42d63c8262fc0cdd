"""docs/configuration.md is generated from the config classes and cannot drift from them."""

from __future__ import annotations

from pathlib import Path

from rmq.tools import configdoc

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_every_setting_has_a_meaning() -> None:
    assert configdoc.missing() == []


def test_the_committed_reference_is_current() -> None:
    assert DOC.read_text() == configdoc.render(), "regenerate: python -m rmq.tools.configdoc > docs/configuration.md"
