"""The unit tests mirror the package: a test of ``tokometer.PKG``'s modules lives in ``tests/unit/PKG/``, and a
file at the top of ``tests/unit`` tests a top-level module (``test_gpu_count.py`` tests ``tokometer/gpu_count.py``)
or the project as a whole (its docs, its import graph, its exported names, this layout)."""

from __future__ import annotations

from pathlib import Path

UNIT = Path(__file__).resolve().parent
SRC = UNIT.parents[1] / "src" / "tokometer"
PROJECT_WIDE = {"test_docs.py", "test_exported_members.py", "test_function_length.py", "test_import_graph.py",
                "test_layout.py"}


def test_each_folder_is_a_package_of_the_source() -> None:
    folders = {p.name for p in UNIT.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
    packages = {p.name for p in SRC.iterdir() if (p / "__init__.py").exists()}
    assert folders <= packages, f"tests/unit folders without a package: {sorted(folders - packages)}"
    assert all((UNIT / name / "__init__.py").exists() for name in folders)


def test_each_top_level_file_tests_a_top_level_module() -> None:
    modules = {p.stem for p in SRC.glob("*.py") if p.stem != "__init__"}
    stray = [p.name for p in UNIT.glob("test_*.py") if p.name not in PROJECT_WIDE
             and not any(p.stem == f"test_{m}" or p.stem.startswith(f"test_{m}_") for m in modules)]
    assert not stray, f"move these into tests/unit/<package>/: {stray}"
