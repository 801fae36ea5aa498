"""Engine identity: what produced a run's numbers, saved with every run as a JSON-able dict.

Two runs are comparable only if the engine, its version, the exact model file, its quantisation,
the context and slot settings and the host are the same; this module gathers those facts.

An engine started by ``tokometer serve`` in another process is known to a later ``bench --url`` by what
``serve`` publishes while it runs (`publish_identity`: a small JSON file per port in the cache directory,
removed when it stops): ``bench`` against that loopback port keeps it as the run's engine
(`published_identity`), so ``estimate --run`` finds the model, its format and its parallel sizes there.
A file whose process is gone, or that is not such a file, is ignored.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from tokometer.bundled import file_sha256
from tokometer.engines._fs import built_binary_path
from tokometer.engines.serverbinary import binary_source, llama_server_version
from tokometer.util.atomicfile import write_atomic
from tokometer.util.cachedir import cache_root
from tokometer.util.errors import TokometerError
from tokometer.util.gguf import gguf_metadata, quantization_of
from tokometer.util.hostinfo import host_info, physical_cores
from tokometer.util.readlimit import read_json

__all__ = ["argv_facts", "host_identity", "llamacpp_identity", "physical_cores", "publish_identity", "published",
           "published_identity"]

_ARGV_FACTS: Final = {"--dtype": "dtype", "--quantization": "quantization", "-q": "quantization",
                      "--kv-cache-dtype": "kv_cache_dtype", "--tensor-parallel-size": "tensor_parallel_size",
                      "-tp": "tensor_parallel_size", "--pipeline-parallel-size": "pipeline_parallel_size",
                      "-pp": "pipeline_parallel_size"}
"""The engine flags whose values an estimate needs, and the identity's name for each."""

_LOOPBACK: Final = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0", "::"})
_MAX_PUBLISHED_BYTES: Final = 1 << 20
"""A published identity (and the engine build's BUILD-INFO.json) is a few KiB; a larger file is not one."""


def argv_facts(argv: Sequence[str]) -> dict[str, Any]:
    """The model (``model_file``: what follows ``serve``), the weights' format, KV-cache format and parallel
    sizes an engine was started with, where its command line says (``--dtype``, ``--quantization``,
    ``--kv-cache-dtype``, ``--tensor-parallel-size``, ``--pipeline-parallel-size``; ``--flag value`` or
    ``--flag=value``); parallel sizes as integers."""
    facts: dict[str, Any] = {}
    args = list(argv)
    if "serve" in args[:3] and (at := args.index("serve") + 1) < len(args) and not args[at].startswith("-"):
        facts["model_file"] = args[at]
    for i, arg in enumerate(args):
        flag, eq, inline = arg.partition("=")
        if flag not in _ARGV_FACTS:
            continue
        value = inline if eq else (args[i + 1] if i + 1 < len(args) else None)
        if value is None:
            continue
        name = _ARGV_FACTS[flag]
        if name.endswith("_size"):
            if value.isdigit():
                facts[name] = int(value)
        else:
            facts[name] = value
    return facts


def _published_path(port: int) -> Path:
    return cache_root() / "engines" / f"{port}.json"


def _port(url: str) -> int | None:
    """The port of a loopback ``url`` (None: not loopback, or no port that can be read)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.hostname not in _LOOPBACK:
        return None
    return port if port is not None else (443 if parts.scheme == "https" else 80)


def publish_identity(root_url: str, identity: dict[str, Any]) -> Path | None:
    """Publish a started engine's ``identity`` for later benchmarks of ``root_url`` (a loopback URL; None:
    not one, or the cache directory cannot be written); the caller removes the file when the engine stops."""
    port = _port(root_url)
    if port is None:
        return None
    path = _published_path(port)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps({"pid": os.getpid(), "root_url": root_url, "identity": identity}, default=str))
    except (OSError, TokometerError):
        return None
    return path


@contextlib.contextmanager
def published(root_url: str, identity: dict[str, Any]) -> Iterator[Path | None]:
    """`publish_identity` for the block's duration: the file is removed when it ends."""
    path = publish_identity(root_url, identity)
    try:
        yield path
    finally:
        if path is not None:
            with contextlib.suppress(OSError):
                path.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def published_identity(url: str) -> dict[str, Any] | None:
    """The identity a running ``tokometer serve`` published for ``url``'s loopback port, else None (no such
    file, its process gone, or not such a file)."""
    port = _port(url)
    if port is None:
        return None
    path = _published_path(port)
    with contextlib.suppress(TokometerError):  # larger than the bound, not there, not JSON: not published
        data = read_json(path, _MAX_PUBLISHED_BYTES, "not read", str(path))
        if isinstance(data, dict) and isinstance(identity := data.get("identity"), dict) \
                and isinstance(pid := data.get("pid"), int) and not isinstance(pid, bool) and pid > 0 and _alive(pid):
            return identity
    return None


def host_identity() -> dict[str, Any]:
    """CPU model, core counts, RAM and OS of this host (see `tokometer.util.hostinfo`)."""
    return dict(host_info())


def _build_info(binary: str) -> dict[str, Any] | None:
    if Path(binary).resolve() != built_binary_path().resolve():
        return None
    try:
        info = read_json(built_binary_path().parent.parent / "BUILD-INFO.json", _MAX_PUBLISHED_BYTES, "not read",
                         "BUILD-INFO.json")
    except TokometerError:
        return None
    return info if isinstance(info, dict) else None


def _chat_template(meta: dict[str, Any], argv: list[str], added: tuple[str, ...]) -> str:
    if added and added[-1] in argv:
        return "gemma turn format, added by tokometer (the GGUF has no chat template)"
    if any(arg.startswith("--chat-template") for arg in argv):
        return "set on the command line"
    return "from the GGUF" if "tokenizer.chat_template" in meta else "llama.cpp's default"


def llamacpp_identity(binary: str, model_path: Path, model_name: str, *, ctx_size: int, parallel: int,
                      threads: int, argv: list[str], meta: dict[str, Any] | None = None,
                      added_template: tuple[str, ...] = ()) -> dict[str, Any]:
    """The identity of a running embedded llama.cpp engine (``meta``: the model's GGUF header)."""
    version, built_with = llama_server_version(binary)
    if meta is None:
        try:
            meta = gguf_metadata(model_path)
        except (OSError, ValueError):
            meta = {}
    return {
        "engine": "llama.cpp",
        "engine_version": version,
        "engine_built_with": built_with,
        "engine_build": _build_info(binary),
        "binary": binary,
        "binary_source": binary_source(binary),
        "model": model_name,
        "model_file": str(model_path),
        "model_sha256": file_sha256(model_path),
        "model_size_bytes": model_path.stat().st_size,
        "model_architecture": meta.get("general.architecture"),
        "model_size_label": meta.get("general.size_label"),
        "quantization": quantization_of(model_path, meta),
        "model_context_length": meta.get(f"{meta.get('general.architecture')}.context_length"),
        "chat_template": _chat_template(meta, argv, added_template),
        "ctx_size": ctx_size,
        "ctx_per_slot": ctx_size // max(1, parallel),
        "parallel": parallel,
        "threads": threads,
        "argv": [arg if len(arg) <= 200 else arg[:60] + "…" for arg in argv],
        "host": host_identity(),
    }
