"""The shipped hardware rows of today's accelerators: each parses, names its source, and gives dense peaks."""

from __future__ import annotations

import csv
import io
from dataclasses import replace
from importlib import resources
from pathlib import Path

import pytest
from rich.console import Console

from tokometer.perf import Deployment, estimate, hardware_table, resolve_hardware, resolve_model
from tokometer.perf.render import render_estimate, render_hardware

NEW_ROWS = ("B300", "GB200", "GB300", "MI325X", "MI350X", "MI355X", "H20", "RTX-5090", "RTX-PRO-6000", "Gaudi-3",
            "TPU-v6e", "TPU7x", "H100-NVL", "T4", "V100-SXM2")
COLUMNS = ("name", "kind", "memory_gb", "bandwidth_gbs", "bf16_tflops_dense", "fp8_tflops_dense", "int8_tops_dense",
           "fp4_tflops_dense", "link_gbs", "gemm_fraction", "source", "note", "fp4_formats")


@pytest.fixture(autouse=True)
def _own_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


def _csv_rows() -> list[dict[str, str]]:
    text = resources.files("tokometer.perf").joinpath("data/hardware.csv").read_text("utf-8")
    return list(csv.DictReader(io.StringIO(text)))


def test_every_row_has_every_column_a_source_and_numbers_where_filled() -> None:
    rows = _csv_rows()
    assert tuple(rows[0]) == COLUMNS
    for row in rows:
        assert row["source"].strip(), row["name"]
        for column in COLUMNS[2:10]:
            assert row[column] == "" or float(row[column]) > 0, (row["name"], column)
    table = hardware_table()
    assert set(NEW_ROWS) <= set(table)
    for name in NEW_ROWS:
        h = table[name]
        assert h.memory_gb and h.bandwidth_gbs and h.bf16_tflops and h.link_gbs and h.source, name


def test_the_published_figures_of_the_new_rows() -> None:
    t = hardware_table()
    figures = {name: (t[name].memory_gb, t[name].bandwidth_gbs, t[name].bf16_tflops, t[name].fp8_tflops,
                      t[name].fp4_tflops, t[name].link_gbs)
               for name in ("B200", "GB200", "MI350X", "MI355X", "H20", "TPU-v6e", "TPU7x", "H100-NVL", "T4",
                            "V100-SXM2", "DGX-Spark")}
    assert figures == {
        "B200": (180, 7700, 2250, 4500, 9000, 1800),  # HGX B200: 72 PFLOPS dense fp4 per 8 GPUs; 7.7 TB/s
        "GB200": (186, 8000, 2500, 5000, 10000, 1800),  # NVL72 rack figures / 72, sparse halved
        "MI350X": (288, 8000, 2306.9, 4613.7, 9227.5, 1075.2),  # the same die at 2.2 GHz rather than 2.4
        "MI355X": (288, 8000, 2516.6, 5033.2, 10066.3, 1075.2),  # fp4 is MXFP4; 7 Infinity Fabric links
        "H20": (96, 4000, 148, 296, None, 900),
        "TPU-v6e": (32, 1638, 918, None, None, 800),  # ICI: Google quotes it bidirectional
        "TPU7x": (192, 7370, 2307, 4614, None, 1200),  # Ironwood
        "H100-NVL": (93.6, 3900, 835.5, 1670.5, None, 600),  # 1,671 and 3,341 with sparsity; a bridged pair
        "T4": (15, 320, 65, None, None, 32),  # the 16-bit figure is fp16; PCIe Gen3 x16
        "V100-SXM2": (31.7, 900, 125, None, None, 300),  # fp16 tensor cores; NVLink 2
        "DGX-Spark": (119, 273, None, None, 500, 50),  # GB10: 1 PFLOP fp4 with sparsity, nothing else published
    }
    pro = t["RTX-PRO-6000"]  # 4,000 AI TOPS of fp4 with sparsity; GDDR7 on a 512-bit bus; PCIe Gen5 x16
    assert (pro.memory_gb, pro.bandwidth_gbs, pro.fp4_tflops, pro.link_gbs) == (96, 1792, 2015.2, 128)
    # dense, not sparse, each the same kind of figure: fp8 twice bf16; fp4 twice fp8 on B200/GB200 and CDNA 4,
    # three times on Blackwell Ultra (B300/GB300), four on the RTX 5090 (its fp8 with fp32 accumulate: half rate)
    ratios = {"B200": 2, "GB200": 2, "MI350X": 2, "MI355X": 2, "B300": 14000 / 4500, "GB300": 3, "RTX-5090": 4,
              "RTX-PRO-6000": 2}
    for name, ratio in ratios.items():
        h = t[name]
        assert h.fp4_tflops and h.fp8_tflops and h.bf16_tflops
        assert h.fp8_tflops == pytest.approx(2 * h.bf16_tflops, rel=0.01), name
        assert h.fp4_tflops == pytest.approx(ratio * h.fp8_tflops, rel=0.01), name
    assert all(t[n].fp4_tflops is None for n in ("H100-SXM", "H200-SXM", "MI300X", "MI325X", "L40S", "H20"))


@pytest.mark.parametrize(("name", "expected"), [("b300", "B300"), ("gb200", "GB200"), ("GB300", "GB300"),
                                                ("mi355x", "MI355X"), ("mi325", "MI325X"), ("h20", "H20"),
                                                ("h200", "H200-SXM"), ("5090", "RTX-5090"), ("gaudi3", "Gaudi-3"),
                                                ("v6e", "TPU-v6e"), ("b200", "B200"), ("rtx pro 6000", "RTX-PRO-6000"),
                                                ("mi350x", "MI350X"), ("ironwood", "TPU7x"), ("tpu7x", "TPU7x")])
def test_the_new_names_resolve(name: str, expected: str) -> None:
    assert resolve_hardware(name).name == expected


def test_fp4_on_blackwell_reads_4_5_bits_and_multiplies_at_the_fp4_peak() -> None:
    model = resolve_model("llama-3.1-8b")
    d = Deployment(model, resolve_hardware("B200"), "fp4")
    embeddings = 2 * 128256 * 4096
    assert d.weight_bytes == pytest.approx((8.03e9 - embeddings) * 4.5 / 8 + embeddings * 2)  # 6.03 GB
    assert d.compute_flops == 9000e12
    # decode at batch 1 is bound by the bytes: 6.03 GB / 7.7 TB/s = 0.783 ms, against 1.18 ms in fp8
    fp8 = Deployment(model, resolve_hardware("B200"), "fp8")
    assert d.weight_bytes / d.hardware.bandwidth == pytest.approx(0.783e-3, rel=2e-3)
    assert fp8.weight_bytes / fp8.hardware.bandwidth == pytest.approx(1.179e-3, rel=2e-3)
    assert Deployment(model, resolve_hardware("MI355X"), "mxfp4").compute_flops == 10066.3e12
    assert Deployment(model, resolve_hardware("MI325X"), "mxfp4").compute_flops == 1307.4e12  # dequantised


def test_list_hardware_shows_the_fp4_and_link_columns_and_the_sources() -> None:
    console = Console(record=True, width=400)
    render_hardware(console, list(hardware_table().values()))
    text = console.export_text()
    assert "fp4 TFLOP/s" in text and "link GB/s" in text and "both directions summed" in text
    b200 = next(line for line in text.splitlines() if line.strip().startswith("B200 "))
    assert "9,000" in b200 and "1,800" in b200 and "NVIDIA HGX B200" in b200
    assert "docs.cloud.google.com/tpu/docs/v6e" in text and "e+" not in text


@pytest.mark.parametrize(("hardware", "dtype", "said"), [
    ("H100", "fp4", "H100-SXM lists no fp4 peak: the nvfp4 weights are dequantised and multiply at bf16, datasheet"),
    ("A100", "fp8", "A100-80GB-SXM lists no fp8 peak: the fp8 weights are dequantised and multiply at bf16"),
    ("MI355X", "nvfp4", "MI355X's fp4 units take mxfp4, not nvfp4: the nvfp4 weights are dequantised and multiply at "
                        "bf16, datasheet 2,517 TFLOP/s"),
    ("B200", "mxfp4", None), ("MI355X", "mxfp4", None), ("H100", "awq", None), ("H100", "fp8", None)])
def test_an_estimate_says_when_the_weights_are_dequantised(hardware: str, dtype: str, said: str | None) -> None:
    console = Console(record=True, width=300)
    d = Deployment(resolve_model("llama-3.1-8b"), resolve_hardware(hardware), dtype)
    render_estimate(console, estimate(d, [1], 100, 10))
    text = console.export_text()
    if said is None:
        assert "dequantised" not in text
    else:
        assert said in text


def test_the_sustained_gemm_share_carries_the_efficiencies_over() -> None:
    """Azure measured a GB200 sustaining 2,744 TFLOPS of fp8 GEMM, "still double that of the H100": 54.9 % of the
    GB200's 5,000, 69.3 % of the H100's 1,979. The typical compute efficiencies were chosen on H100 and H200, so
    on a GB200 or B200 (the same dies) they count 0.549 / 0.693 = 0.79 of themselves; elsewhere 1."""
    from tokometer.perf.roofline import BOUND, FIT_GEMM_FRACTION, Efficiency, decode_step_s, prefill_s

    t = hardware_table()
    assert t["GB200"].gemm_fraction == pytest.approx(2744 / 5000, abs=1e-3) and t["B200"].gemm_fraction == 0.549
    assert t["H100-SXM"].gemm_fraction == t["H200-SXM"].gemm_fraction == FIT_GEMM_FRACTION
    # Azure's ND GB300 v6: 3,308.5 TFLOPS of fp8 GEMM at 16,384³ (the same benchmark), 0.662 of the 5,000
    assert t["GB300"].gemm_fraction == pytest.approx(3308.5 / 5000, abs=1e-3) and "3,308.5" in t["GB300"].note
    assert t["B300"].gemm_fraction == t["GB300"].gemm_fraction  # the same GPU, as the B200 takes the GB200's
    assert pytest.approx(2744 / 2 / 1979, abs=1e-3) == FIT_GEMM_FRACTION
    model = resolve_model("llama-3.3-70b")
    gb200 = Deployment(model, t["GB200"], "nvfp4", "fp8")
    plain = Deployment(model, replace(t["GB200"], gemm_fraction=None), "nvfp4", "fp8")
    assert gb200.compute_scale == pytest.approx(0.549 / 0.693) and plain.compute_scale == 1.0
    assert Deployment(model, t["H100-SXM"], "fp8").compute_scale == 1.0
    assert Deployment(model, t["RTX-PRO-6000"], "nvfp4").compute_scale == 1.0  # no published figure
    eff = Efficiency(layer_overhead_s=0.0)
    # a prefill is compute bound: its time grows by 1 / 0.79; the bound (the datasheet's 100 %) does not move
    assert prefill_s(gb200, 4000, 0, eff) == pytest.approx(prefill_s(plain, 4000, 0, eff) / gb200.compute_scale)
    assert prefill_s(gb200, 4000) == prefill_s(plain, 4000)
    assert decode_step_s(gb200, 2048, 0, BOUND) == decode_step_s(plain, 2048, 0, BOUND)
    assert decode_step_s(gb200, 2048, 0, eff) > decode_step_s(plain, 2048, 0, eff)


def test_an_mi355x_multiplies_mxfp4_at_its_fp4_peak_and_nvfp4_dequantised() -> None:
    """Its scaled matrix instructions take E8M0 block scales (the MX formats), not NVFP4's E4M3 scale per 16: vLLM
    runs NVFP4 checkpoints there by its emulation backend, dequantised to bf16 (pull request 35733). Blackwell's
    fp4 tensor cores take both; gpt-oss's mxfp4 experts on an MI355X keep the fp4 peak."""
    model, mi355x, b200 = resolve_model("llama-3.1-8b"), resolve_hardware("MI355X"), resolve_hardware("B200")
    assert mi355x.fp4_formats == ("mxfp4",) and b200.fp4_formats == ("nvfp4", "mxfp4")
    assert Deployment(model, mi355x, "nvfp4").compute_dtype == "bf16"
    assert Deployment(model, mi355x, "nvfp4").compute_flops == 2516.6e12
    assert Deployment(model, mi355x, "mxfp4").compute_flops == 10066.3e12
    assert Deployment(model, b200, "nvfp4").compute_flops == Deployment(model, b200, "mxfp4").compute_flops == 9000e12
    blended = Deployment(resolve_model("gpt-oss-120b"), mi355x, "bf16").compute_flops
    assert blended is not None and 2516.6e12 < blended < 10066.3e12  # the experts at the fp4 peak, the rest bf16
    console = Console(record=True, width=400)
    render_hardware(console, [mi355x, b200])
    assert "10,066.3 (mxfp4)" in console.export_text() and "9,000 (" not in console.export_text()


def test_a_hardware_files_fp4_formats_are_named(tmp_path: Path) -> None:
    from tokometer.util.errors import ConfigError

    path = tmp_path / "hw.toml"
    base = '[[hardware]]\nname = "x"\nbandwidth_gbs = 1000\nbf16_tflops_dense = 100\nfp4_tflops_dense = 400\n'
    for given, formats in (("", ("nvfp4", "mxfp4")), ('fp4_formats = "mxfp4"\n', ("mxfp4",)),
                           ('fp4_formats = "nvfp4, mxfp4"\n', ("nvfp4", "mxfp4")),
                           ('fp4_formats = ["mxfp4"]\n', ("mxfp4",))):
        path.write_text(base + given)
        assert resolve_hardware("x", path).fp4_formats == formats
    for bad in ('"fp4"', '""', "[]", "3", '["mxfp4", 1]'):
        path.write_text(base + f"fp4_formats = {bad}\n")
        if bad == '""':
            assert resolve_hardware("x", path).fp4_formats == ("nvfp4", "mxfp4")  # empty: as left out
            continue
        with pytest.raises(ConfigError, match=r"hardware 'x': fp4_formats = .*: give the 4-bit formats"):
            resolve_hardware("x", path)


def test_a_hardware_files_gemm_share_is_a_fraction(tmp_path: Path) -> None:
    from tokometer.util.errors import ConfigError

    path = tmp_path / "hw.toml"
    path.write_text('[[hardware]]\nname = "x"\nbandwidth_gbs = 1000\nbf16_tflops_dense = 100\ngemm_fraction = 0.5\n')
    assert resolve_hardware("x", path).gemm_fraction == 0.5
    for bad, why in (("1.5", "is above 1"), ("0", "is not a positive number"), ("nan", "is not a positive number"),
                     ('"most"', "is not a number")):
        path.write_text(f'[[hardware]]\nname = "x"\nbandwidth_gbs = 1000\ngemm_fraction = {bad}\n')
        with pytest.raises(ConfigError, match=f"hardware 'x': gemm_fraction = .* {why}"):
            resolve_hardware("x", path)


def test_the_gh200_is_its_hopper_gpu_with_96_gb_of_hbm3() -> None:
    """GH200 480GB (the release-0.17 perf table's column): the H100's FLOP/s and GEMM share, its own 96 GB at
    4 TB/s; Llama 3.1 70B in fp8 leaves it ~17 GiB of KV cache where an 80 GB H100 leaves ~2."""
    gh200, h100 = resolve_hardware("gh200"), resolve_hardware("H100-SXM")
    assert (gh200.memory_gb, gh200.bandwidth_gbs) == (96, 4000)
    assert (gh200.bf16_tflops, gh200.fp8_tflops, gh200.gemm_fraction) == (h100.bf16_tflops, h100.fp8_tflops,
                                                                          h100.gemm_fraction)
    model = resolve_model("llama-3.1-70b")
    room = {hw.name: Deployment(model, hw, "fp8", "fp8").kv_budget_bytes() / 2**30 for hw in (gh200, h100)}
    assert 16 < room["GH200"] < 17.5 and 2 < room["H100-SXM"] < 2.7


def test_the_a100s_measured_gemm_share_scales_the_compute_efficiencies() -> None:
    """Azure's cuBLASLt figure (256.5 of 312 fp16 TFLOPS at 16,384³, the method of its GB200 figure): 0.822 of the
    datasheet against the fit GPUs' 0.693, so the compute efficiencies count 1.19 of themselves on an A100."""
    for name in ("A100-80GB-SXM", "A100-40GB-SXM"):
        a100 = resolve_hardware(name)
        assert a100.gemm_fraction == 0.822 and "256.5" in a100.note
        d = Deployment(resolve_model("llama-3.1-8b"), a100, "fp16", "fp16")
        assert d.compute_scale == pytest.approx(0.822 / 0.693)


def test_amds_max_achievable_fp8_gemm_scales_the_compute_efficiencies_on_mi300x_and_mi325x() -> None:
    """AMD's own max-achievable fp8 GEMM (hipBLASLt: 1,273 of 2,614.9 TFLOPS on an MI300X, 1,519 on an MI325X) is
    0.487 and 0.581 of the datasheet against the fit GPUs' 0.693: the compute efficiencies count 0.70 and 0.84 of
    themselves there, so a compute-bound prefill takes 1 / 0.70 as long; the bandwidth-bound decode is unchanged."""
    from tokometer.perf.roofline import FIT_GEMM_FRACTION, Efficiency, decode_step_s, prefill_s

    eff = Efficiency(layer_overhead_s=0)  # the fixed cost a layer is the same whatever the GEMM share
    model = resolve_model("llama-3.1-70b")
    for name, measured, share in (("MI300X", "1,273", 0.487), ("MI325X", "1,519", 0.581)):
        hw = resolve_hardware(name)
        assert hw.gemm_fraction == share and measured in hw.note and "Max-Achievable" in hw.note
        assert hw.gemm_fraction == pytest.approx(float(measured.replace(",", "")) / (hw.fp8_tflops or 0), abs=1e-3)
        d = Deployment(model, hw, "fp8", "fp8")  # one GPU: no all-reduce beside the matmuls
        plain = Deployment(model, replace(hw, gemm_fraction=None), "fp8", "fp8")
        assert d.compute_scale == pytest.approx(share / FIT_GEMM_FRACTION)
        assert prefill_s(d, 4000, 0, eff) == pytest.approx(prefill_s(plain, 4000, 0, eff) / d.compute_scale)
        assert decode_step_s(d, 1, 0, eff) == pytest.approx(decode_step_s(plain, 1, 0, eff))
    mi355x = resolve_hardware("MI355X")  # no MAF published: HipKittens' hipBLASLt baseline, 3,293 at 16,384³
    assert mi355x.gemm_fraction == 0.654 and "3,293" in mi355x.note and "HipKittens" in mi355x.note
    assert mi355x.gemm_fraction == pytest.approx(3293 / (mi355x.fp8_tflops or 0), abs=1e-3)
