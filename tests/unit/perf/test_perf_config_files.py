"""A model's ``config.json`` and safetensors index as `estimate` reads them from disk: within one bound in bytes
and nesting (`tokometer.util.jsonstream`), each problem one `ConfigError` naming the file, never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokometer.perf.loaders import resolve_model, weights_on_disk
from tokometer.util.errors import ConfigError

TINY = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, "intermediate_size": 128,
        "vocab_size": 100}


@pytest.mark.parametrize(("text", "said"), [
    ("{bad json", "not JSON"),
    ("[1, 2]", "a JSON list, not an object"),
    ("7", "a JSON int, not an object"),
    ('"config"', "a JSON str, not an object"),
    ("[" * 100_000, "nested deeper than 64 levels"),
    (json.dumps(TINY) + " trailing", "more after the JSON document ends"),
    (json.dumps({**TINY, "text_config": [1]}), "its text_config is a JSON list"),
    (json.dumps({**TINY, "llm_config": "x"}), "its llm_config is a JSON str"),
    (json.dumps({**TINY, "vocab_size": -5}), "vocab_size must not be negative"),
    (json.dumps({**TINY, "max_position_embeddings": 2**40}), "max_position_embeddings must be at most 2,147,483,648"),
    (json.dumps({**TINY, "intermediate_size": -(10**12)}), "intermediate_size must not be negative"),
])
def test_a_config_file_that_is_not_one_is_one_error(tmp_path: Path, text: str, said: str) -> None:
    (tmp_path / "config.json").write_text(text)
    with pytest.raises(ConfigError, match=said):
        resolve_model(str(tmp_path))


def test_a_config_file_past_its_bound_is_refused_before_it_is_read_whole(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({**TINY, "padding": "a" * (17 << 20)}))
    with pytest.raises(ConfigError, match="larger than 16 MiB"):
        resolve_model(str(tmp_path))


def test_a_quantization_config_that_is_not_an_object_is_no_quantisation(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({**TINY, "quantization_config": [1]}))
    assert resolve_model(str(tmp_path)).native_dtype == "bf16"


@pytest.mark.parametrize("index", ["[1]", "{bad", '{"metadata": {"total_size": "x"}}', '{"metadata": [1]}',
                                   '{"metadata": {"total_size": -4}}', '{"metadata": {"total_size": 1e999}}'])
def test_an_unusable_safetensors_index_is_passed_over_for_the_files_sizes(tmp_path: Path, index: str) -> None:
    (tmp_path / "model.safetensors.index.json").write_text(index)
    assert weights_on_disk(tmp_path) is None
    (tmp_path / "model-00001.safetensors").write_bytes(b"\0" * 1000)
    assert weights_on_disk(tmp_path) == 1000.0


@pytest.mark.parametrize("text", ["7", '"config"', "null", "[1]"])
def test_a_config_file_that_is_not_an_object_beside_a_quantisation_sidecar_is_one_error(tmp_path: Path,
                                                                                        text: str) -> None:
    (tmp_path / "config.json").write_text(text)
    (tmp_path / "hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": "NVFP4"}}))
    with pytest.raises(ConfigError, match="not an object"):
        resolve_model(str(tmp_path))


def test_a_config_file_is_named_by_its_folder_or_its_own_name_never_dot(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A config.json goes by its folder (in the current folder, that folder's name, where it was "."); another
    .json file by its own path, so two files of one folder are told apart."""
    folder = tmp_path / "qwen3-mixed"
    folder.mkdir()
    for name in ("config.json", "a.json", "b.json"):
        (folder / name).write_text(json.dumps(TINY))
    assert resolve_model(str(folder / "config.json")).name == str(folder)
    assert resolve_model(str(folder)).name == str(folder)
    assert resolve_model(str(folder / "a.json")).name == str(folder / "a")
    monkeypatch.chdir(folder)
    assert resolve_model("config.json").name == "qwen3-mixed"
    assert resolve_model(".").name == "qwen3-mixed"
    assert resolve_model("b.json").name == "b"
