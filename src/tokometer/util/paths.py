"""Output files checked before the work that fills them: a run is not measured only to fail at ``--json``.

The writers (`tokometer.util.atomicfile`) create missing directories (``mkdir -p``), so a path in a
directory that does not exist yet is fine; what cannot work is a path that is a directory, one below
a regular file, or one in a directory this process may not write (a file is replaced by a new one
written beside it, so even an existing file needs a writable directory). Nothing is created by the check.
``-``, a descriptor's name (``/dev/stdout``), a FIFO or a character device is written in place
(`tokometer.util.outputtarget`): only that it may be written is checked.
"""

from __future__ import annotations

import os
from pathlib import Path

from tokometer.util.errors import OutputError
from tokometer.util.outputtarget import output_target

__all__ = ["writable_file_problem"]


def writable_file_problem(path: Path, example: str = "out.json") -> str | None:
    """Why the file ``path`` cannot be written (missing directories would be created), or None.

    ``example``: a file name suggested inside ``path`` when ``path`` is a directory.
    """
    if str(path) != "-" and Path(path).expanduser().is_dir():
        return f"{path.expanduser()} is a directory: give a file path, e.g. {path.expanduser() / example}"
    try:
        target = output_target(path)
    except OutputError as exc:
        return str(exc)
    if target.kind in ("stdout", "descriptor"):
        return None
    path = path.expanduser()
    if path.exists():  # a FIFO or a device is written in place: only its own permission matters
        if not os.access(path, os.W_OK):
            return f"cannot write {path}: permission denied; give a path you may write"
        if target.kind == "in_place":
            return None
        directory = Path(os.path.realpath(path)).parent
        if not os.access(directory, os.W_OK | os.X_OK):  # a new version is written beside it, then renamed
            return (f"cannot replace {path}: no permission to write in {directory}, where its new version is "
                    "written first (tokometer.util.atomicfile); give a path you may write")
        return None
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent  # these directories would be created
    if not ancestor.is_dir():
        return f"cannot create {path}: {ancestor} is a file, not a directory"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"cannot create {path}: no permission to write in {ancestor}; give a path you may write"
    return None
