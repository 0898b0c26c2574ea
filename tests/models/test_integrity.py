from __future__ import annotations

import hashlib
from pathlib import Path

from fimble.models.integrity import (
    RecordEntry,
    b64_digest,
    parse_wheel_record,
    read_verified,
    record_path,
    sha256_file,
    write_verified,
)


def test_sha256_file_reports_progress(tmp_path: Path) -> None:
    path = tmp_path / "f"
    data = b"abc" * 3_000_000
    path.write_bytes(data)
    seen: list[int] = []
    assert sha256_file(path, seen.append) == hashlib.sha256(data).hexdigest()
    assert sum(seen) == len(data)


def test_record_spelling_and_parsing() -> None:
    digest = b64_digest(hashlib.sha256(b"").digest())
    assert digest == "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"
    text = (
        f'pkg/data/part01.bin,sha256={digest},0\npkg-1.0.dist-info/RECORD,,\n"quoted,name",SHA256=abc==,5\n'
    )
    rec = parse_wheel_record(text)
    assert rec["pkg/data/part01.bin"].digest == digest and rec["pkg/data/part01.bin"].size == 0
    assert "pkg-1.0.dist-info/RECORD" not in rec
    assert rec["quoted,name"] == RecordEntry("sha256", "abc", 5)  # CSV quoting, padding stripped


def test_verified_record_roundtrip_and_staleness(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x" * 10)
    assert read_verified(model) is None
    rec = write_verified(model, "ab" * 32, "test")
    assert record_path(model).name == "m.gguf.verified"
    again = read_verified(model)
    assert again == rec and again.matches(model.stat())
    model.write_bytes(b"y" * 11)
    assert not again.matches(model.stat())
    record_path(model).write_text("{not json")
    assert read_verified(model) is None
