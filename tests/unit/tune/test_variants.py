"""Planning a tune's variants from what the user typed: --set, --vary, --grid, a variants file; the fingerprint."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokometer.tune.variants import (
    MAX_VARIANTS,
    check_variants,
    fingerprint,
    parse_set,
    parse_vary,
    plan_variants,
    read_variants_file,
)
from tokometer.util.errors import ConfigError

_FEW = settings(max_examples=60, deadline=None, derandomize=True, database=None)


def _names(variants: tuple[object, ...]) -> list[str]:
    return [v.name for v in variants]  # type: ignore[attr-defined]


def test_one_change_at_a_time_in_the_order_given_skipping_the_baselines_own_values() -> None:
    baseline = parse_set(["parallel=2", "ctx-size=8192"])
    variants = plan_variants(baseline, vary=parse_vary(["parallel=1,2,4", "flash-attn=on,off"]))
    assert _names(variants) == ["baseline", "parallel=1", "parallel=4", "flash-attn=on", "flash-attn=off"]
    assert [v.index for v in variants] == [0, 1, 2, 3, 4]
    assert variants[2].settings == {"parallel": "4", "ctx-size": "8192"} and variants[2].changed == ("parallel",)
    assert variants[3].settings == {"parallel": "2", "ctx-size": "8192", "flash-attn": "on"}
    assert variants[0].changed == () and variants[0].is_baseline


def test_a_grid_is_the_product_in_the_order_given_without_the_baselines_point() -> None:
    variants = plan_variants({"parallel": "1"}, vary=parse_vary(["parallel=1,2", "ubatch-size=256,512"]), grid=True)
    assert _names(variants) == ["baseline", "parallel=1,ubatch-size=256", "parallel=1,ubatch-size=512",
                                "parallel=2,ubatch-size=256", "parallel=2,ubatch-size=512"]
    assert variants[1].changed == ("ubatch-size",) and variants[3].changed == ("parallel", "ubatch-size")
    with_baseline = plan_variants({"parallel": "1", "ubatch-size": "256"},
                                  vary=parse_vary(["parallel=1,2", "ubatch-size=256"]), grid=True)
    assert _names(with_baseline) == ["baseline", "parallel=2,ubatch-size=256"]


def test_a_grid_too_large_is_refused_before_it_is_made() -> None:
    vary = parse_vary([f"s{i}=" + ",".join(str(v) for v in range(100)) for i in range(8)])  # 10^16 points
    with pytest.raises(ConfigError, match=f"a tune tries at most {MAX_VARIANTS}"):
        plan_variants({}, vary=vary, grid=True)


@pytest.mark.parametrize(("items", "message"), [
    (["parallel"], "is not NAME=V1,V2"),
    (["=1,2"], "name is empty"),
    (["parallel=1,,2"], "a value is empty"),
    (["parallel=1,2,1"], "'1' is listed twice"),
    (["parallel=1", "parallel=2"], "parallel is given twice"),
    (["ctx size=1"], "is not a setting's name"),
    (["p=" + "x" * 5000], "longer than"),
])
def test_bad_vary_is_one_line(items: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        parse_vary(items)
    assert "\n" not in str(caught.value)


def test_set_takes_a_flag_alone_and_refuses_a_setting_twice() -> None:
    assert parse_set(["no-mmap=", "threads=2"]) == {"no-mmap": "", "threads": "2"}
    with pytest.raises(ConfigError, match="threads is given twice"):
        parse_set(["threads=1", "threads=2"])
    with pytest.raises(ConfigError, match="is not NAME=VALUE"):
        parse_set(["threads"])


def test_nothing_to_try_and_bad_combinations_are_refused() -> None:
    with pytest.raises(ConfigError, match="nothing to try"):
        plan_variants({"parallel": "2"}, vary=parse_vary(["parallel=2"]))
    with pytest.raises(ConfigError, match="--grid needs --vary"):
        plan_variants({}, grid=True)
    with pytest.raises(ConfigError, match="cannot be combined"):
        plan_variants({}, vary=parse_vary(["parallel=2"]), named=[("two", {"parallel": "2"})])


def test_a_variants_file_in_file_order_with_values_as_text(tmp_path: Path) -> None:
    path = tmp_path / "variants.toml"
    path.write_text('[[variant]]\nname = "q8"\nquantization = "Q8_0"\n\n'
                    '[[variant]]\nname = "two slots, flash"\nparallel = 2\nflash-attn = true\n'
                    '[[variant]]\nname = "half"\ngpu-memory-utilization = 0.5\n', "utf-8")
    named = read_variants_file(path)
    assert named == [("q8", {"quantization": "Q8_0"}), ("two slots, flash", {"parallel": "2", "flash-attn": "on"}),
                     ("half", {"gpu-memory-utilization": "0.5"})]
    variants = plan_variants({"parallel": "1"}, named=named)
    assert _names(variants) == ["baseline", "q8", "two slots, flash", "half"]
    assert variants[1].settings == {"parallel": "1", "quantization": "Q8_0"} and variants[1].changes_weights
    assert variants[2].changed == ("parallel", "flash-attn") and not variants[2].changes_weights


@pytest.mark.parametrize(("text", "message"), [
    ('[[variant]]\nname = "a"\nparallel = [1, 2]\n', r"variant 1 \('a'\): parallel: give a text, a number"),
    ('[[variant]]\nname = "a"\nparallel = \n', "not valid TOML: .*line 3"),
    ('[[variant]]\nparallel = 2\n', "variant 1: give it a name"),
    ('[[variant]]\nname = "a"\n', "no settings"),
    ('[[variant]]\nname = "a"\np = 1\n[[variant]]\nname = "a"\np = 2\n', "variant 2 is named 'a' like another"),
    ('name = "a"\n', "unknown key 'name' at the top level"),
    ("", "no \\[\\[variant\\]\\] tables"),
    ('[[variant]]\nname = "a"\nwhen = 1979-05-27\n', "give a text, a number or true/false"),
])
def test_a_bad_variants_file_is_one_line_naming_where(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "v.toml"
    path.write_text(text, "utf-8")
    with pytest.raises(ConfigError, match=message) as caught:
        plan_variants({}, named=read_variants_file(path))
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_a_huge_or_binary_variants_file_is_refused(tmp_path: Path) -> None:
    huge = tmp_path / "huge.toml"
    huge.write_bytes(b"#" * (2 * 1024 * 1024))
    with pytest.raises(ConfigError, match="larger than 1 MiB"):
        read_variants_file(huge)
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe[[variant]]")
    with pytest.raises(ConfigError, match="not UTF-8"):
        read_variants_file(binary)
    with pytest.raises(ConfigError, match="cannot read"):
        read_variants_file(tmp_path / "missing.toml")


def test_settings_are_checked_per_variant_naming_it() -> None:
    variants = plan_variants({}, vary=parse_vary(["parallel=2,0"]))
    with pytest.raises(ConfigError, match="variant parallel=0: setting parallel"):
        check_variants("llamacpp", variants)
    check_variants("llamacpp", variants[:2])
    with pytest.raises(ConfigError, match="the baseline: setting"):
        check_variants("llamacpp", plan_variants({"host": "0.0.0.0"}, vary=parse_vary(["parallel=2"])))


def test_the_same_plan_twice_is_the_same_tune_and_another_is_not() -> None:
    def plan(values: str) -> str:
        variants = plan_variants({"ctx-size": "4096"}, vary=parse_vary([f"parallel={values}"]))
        return fingerprint("llamacpp", variants, {"requests": 8, "concurrency": [1, 2]})

    assert plan("1,2,4") == plan("1,2,4")
    assert plan("1,2,4") != plan("1,4,2")  # the order is part of the tune
    variants = plan_variants({}, vary=parse_vary(["parallel=2"]))
    assert fingerprint("llamacpp", variants, {"requests": 8}) != fingerprint("vllm", variants, {"requests": 8})
    assert fingerprint("llamacpp", variants, {"requests": 8}) != fingerprint("llamacpp", variants, {"requests": 9})


_TEXT = st.text(st.characters(codec="utf-8"), max_size=60)


@_FEW
@given(st.lists(_TEXT, max_size=4))
def test_any_vary_text_plans_or_says_why_in_one_line(items: list[str]) -> None:
    try:
        varied = parse_vary(items)
        variants = plan_variants({}, vary=varied)
    except ConfigError as exc:
        assert "\n" not in str(exc).strip() or "\n" in "".join(items)
        return
    assert variants[0].name == "baseline" and len(variants) <= MAX_VARIANTS
    assert plan_variants({}, vary=varied) == variants  # deterministic


@_FEW
@given(st.lists(_TEXT, max_size=4))
def test_any_set_text_is_settings_or_one_error(items: list[str]) -> None:
    try:
        baseline = parse_set(items)
    except ConfigError:
        return
    assert len(baseline) == len(items) and all(name.strip() == name for name in baseline)
