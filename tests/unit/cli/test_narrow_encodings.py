"""Standard output and error in an encoding narrower than UTF-8 (``PYTHONIOENCODING=ascii`` or ``latin-1``, as a
latin-1 locale gives): the command's output is written whole, with ``?`` for what the encoding lacks, and an
error is still one line with exit status 2, never a ``UnicodeEncodeError`` traceback. Each case runs the real
command line in a subprocess with the encoding set."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _run(encoding: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONIOENCODING": encoding}
    return subprocess.run([sys.executable, "-m", "tokometer", *args], capture_output=True, env=env, timeout=120,
                          check=False)


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_an_estimate_is_written_whole_in_a_narrow_encoding(encoding: str) -> None:
    done = _run(encoding, "estimate", "--model", "llama-3.1-8b", "--hardware", "H100-SXM")
    out, err = done.stdout.decode(encoding), done.stderr.decode(encoding)
    assert done.returncode == 0, err
    assert "Traceback" not in err and err == "", err
    # the first line carries a × (latin-1 has it, ascii does not); the last lines are there: nothing broke off
    assert out.splitlines()[0] == f"llama-3.1-8b bf16 (KV bf16) on 1 {'×' if encoding == 'latin-1' else '?'} H100-SXM"
    assert "max load  225 sequences at once" in out and "checked   against published figures" in out
    assert ("14.4 ? 26.2" in out) and "→" not in out  # neither encoding has the arrow


def test_an_error_naming_what_the_encoding_lacks_is_one_line() -> None:
    done = _run("ascii", "estimate", "--model", "/nonexistent/modèle→/config.json", "--hardware", "H100-SXM")
    err = done.stderr.decode("ascii")
    assert done.returncode == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tokometer: error: "), err
    assert "/nonexistent/mod?le?/config.json" in lines[0], err
