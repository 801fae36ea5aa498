"""The FP4 block formats: their bits with the scale overhead, their names, and which peak they multiply at."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokometer.perf import Deployment, resolve_hardware, resolve_model
from tokometer.perf.quant import kv_bytes, normalize_dtype, weight_dtype
from tokometer.util.errors import ConfigError

LLAMA_8B = 8.03e9
EMBEDDINGS = 2 * 128256 * 4096  # Llama 3.1 8B: the input table and the LM head, untied, kept in 16 bits


@pytest.fixture(autouse=True)
def _own_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


def test_the_bits_of_a_weight_count_the_block_scales() -> None:
    nvfp4, mxfp4 = weight_dtype("nvfp4"), weight_dtype("mxfp4")
    assert nvfp4.bits == 4 + 8 / 16 == 4.5  # E2M1 values + one E4M3 scale per 16
    assert mxfp4.bits == 4 + 8 / 32 == 4.25  # E2M1 values + one E8M0 scale per 32
    assert nvfp4.linear_only and mxfp4.linear_only
    assert (nvfp4.compute, mxfp4.compute) == ("fp4", "fp4")
    assert (nvfp4.cpu_compute, mxfp4.cpu_compute) == ("bf16", "bf16")  # no fp4 units on a CPU
    d = Deployment(resolve_model("llama-3.1-8b"), resolve_hardware("H100"), "nvfp4")
    assert d.weight_bytes == pytest.approx((LLAMA_8B - EMBEDDINGS) * 4.5 / 8 + EMBEDDINGS * 2)  # 5.19 GB


@pytest.mark.parametrize(("name", "canonical"), [("fp4", "nvfp4"), ("FP4", "nvfp4"), ("NVFP4", "nvfp4"),
                                                 ("modelopt_fp4", "nvfp4"), ("MXFP4", "mxfp4"), ("mxfp4", "mxfp4")])
def test_the_names_of_the_fp4_formats(name: str, canonical: str) -> None:
    assert normalize_dtype(name) == canonical
    assert weight_dtype(name).name == canonical


@pytest.mark.parametrize("name", ["MXFP4", " mxfp4 "])
def test_an_mxfp4_kv_cache_is_refused_saying_it_is_not_modelled(name: str) -> None:
    with pytest.raises(ConfigError, match=r"MXFP4 KV cache .* is not modelled: use nvfp4"):
        kv_bytes(name)
    assert kv_bytes("fp8") == 1.0


@pytest.mark.parametrize("name", ["fp4", "nvfp4", "NVFP4", " fp4 "])
def test_an_nvfp4_kv_cache_is_4_5_bits_an_element(name: str) -> None:
    assert kv_bytes(name) == 4.5 / 8  # E2M1 values and one E4M3 scale per 16


def test_an_nvfp4_cache_needs_nvfp4_tensor_cores_and_its_attention_runs_in_fp8() -> None:
    model = resolve_model("llama-3.3-70b")
    d = Deployment(model, resolve_hardware("B200"), "nvfp4", "nvfp4")
    fp8 = Deployment(model, resolve_hardware("B200"), "nvfp4", "fp8")
    assert d.attention_compute_dtype == "fp8" and d.kv_bytes_per_token == fp8.kv_bytes_per_token * 4.5 / 8
    assert d.kv_capacity_tokens() > fp8.kv_capacity_tokens() * 1.7
    for hardware in ("H100", "MI355X", "A100"):  # no fp4 units, or fp4 units that take MXFP4 only
        with pytest.raises(ConfigError, match=r"a KV cache in nvfp4: an NVFP4 KV cache needs fp4 tensor cores that "
                                              r"take NVFP4 .* has none: use an fp8 one \(--kv-dtype fp8\)"):
            Deployment(model, resolve_hardware(hardware), "fp8", "nvfp4")


def test_fp4_without_an_fp4_column_is_dequantised_to_bf16() -> None:
    model = resolve_model("llama-3.1-8b")
    for hardware in ("H100", "A100", "MI300X"):
        h = resolve_hardware(hardware)
        for fmt in ("nvfp4", "mxfp4"):
            d = Deployment(model, h, fmt)
            assert d.compute_dtype == "fp4" and d.compute_peak is not None
            assert d.compute_peak.dtype == "bf16" and d.compute_flops == h.bf16_tflops * 1e12  # type: ignore[operator]


def test_fp4_runs_at_the_fp4_column_where_a_row_has_one(tmp_path: Path) -> None:
    path = tmp_path / "hw.toml"
    path.write_text('[[hardware]]\nname = "fp4-gpu"\nmemory_gb = 100\nbandwidth_gbs = 8000\nbf16_tflops_dense = 1000\n'
                    'fp8_tflops_dense = 2000\nfp4_tflops_dense = 4000\nlink_gbs = 1800\n')
    h = resolve_hardware("fp4-gpu", path)
    assert (h.fp4_tflops, h.link_gbs) == (4000, 1800)
    d = Deployment(resolve_model("llama-3.1-8b"), h, "mxfp4")
    assert d.compute_flops == 4000e12 and d.compute_peak is not None and d.compute_peak.dtype == "fp4"
    assert Deployment(resolve_model("llama-3.1-8b"), h, "fp8").compute_flops == 2000e12
    path.write_text('[[hardware]]\nname = "x"\nbandwidth_gbs = 1\nfp4_tflops_dense = "fast"\n')
    with pytest.raises(ConfigError, match="fp4_tflops_dense = 'fast' is not a number"):
        resolve_hardware("x", path)
    for bad in ("nan", "inf", "-900", "0", "true"):  # TOML takes each: none is a peak
        path.write_text(f'[[hardware]]\nname = "x"\nbandwidth_gbs = 1\nlink_gbs = {bad}\n')
        with pytest.raises(ConfigError, match=r"hardware 'x': link_gbs = .* is not a positive number"):
            resolve_hardware("x", path)
