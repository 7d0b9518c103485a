"""Every `_metadata` version ever written stays readable: the golden files under golden/."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkpoint.metadata import FORMAT_VERSION, SUPPORTED_VERSIONS, decode_metadata, encode_metadata
from tests.metadata.cases import CASES, GOLDEN_DIR, cases_of

GOLDEN_FILES = sorted(GOLDEN_DIR.glob("v*/*.metadata"))


def test_every_supported_version_has_golden_files() -> None:
    versions = {int(path.parent.name[1:]) for path in GOLDEN_FILES}
    assert versions == set(SUPPORTED_VERSIONS)
    for version in versions:
        names = {p.stem for p in GOLDEN_FILES if p.parent.name == f"v{version}"}
        assert names == cases_of(version), f"version {version} lacks golden files"


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_golden_file_decodes_to_its_case(path: Path) -> None:
    make, relative_to = CASES[path.stem]
    decoded = decode_metadata(path.read_bytes(), source=str(path), base_dir=relative_to)
    assert decoded == make()


@pytest.mark.parametrize("name", sorted(CASES))
def test_current_version_encodes_exactly_its_golden_file(name: str) -> None:
    # Byte-identical output proves the encoder has not drifted from the committed format.
    make, relative_to = CASES[name]
    golden = GOLDEN_DIR / f"v{FORMAT_VERSION}" / f"{name}.metadata"
    assert encode_metadata(make(), relative_to=relative_to) == golden.read_bytes()


def test_relocated_savepoint_golden_file_resolves_against_its_new_place() -> None:
    data = (GOLDEN_DIR / "v1" / "savepoint.metadata").read_bytes()
    decoded = decode_metadata(data, source="x/_metadata", base_dir="/mnt/moved")
    counts = decoded.operator_states["counts"].subtask_states[2].keyed[0].stream
    assert counts.path == "/mnt/moved/counts-2-0"  # type: ignore[union-attr]
