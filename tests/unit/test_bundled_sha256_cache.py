"""`tokometer.bundled.file_sha256`'s cache of model files' hashes: one that is replaced or corrupt only costs a
hash, never a wait or the memory."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from tokometer.bundled import file_sha256


@pytest.mark.timeout(60)  # a read that waits for a FIFO's writer fails here instead of hanging
def test_a_replaced_cache_is_passed_over_and_written_anew(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache was read whole, unbounded: ``/dev/zero`` in its place took the memory, a FIFO waited for a writer
    forever, a JSON list was a TypeError's traceback when the new hash was stored in it. A FIFO or a device
    there is not written over either (the write would wait for the FIFO's reader)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF model bytes")
    expected = hashlib.sha256(b"GGUF model bytes").hexdigest()
    cache = tmp_path / "xdg" / "tokometer" / "sha256-cache.json"
    cache.parent.mkdir(parents=True)
    wrong = json.dumps({f"{model.resolve()}|16|{model.stat().st_mtime_ns}": 5})  # its key, but not a hash
    for replace in (lambda: cache.symlink_to("/dev/zero"), lambda: os.mkfifo(cache),
                    lambda: cache.write_text("[1]", encoding="utf-8"), lambda: cache.write_text(wrong)):
        cache.unlink(missing_ok=True)
        replace()
        assert file_sha256(model) == expected
    assert cache.is_file() and expected in cache.read_text(encoding="utf-8")  # a regular file: written anew
