"""The tenant mix file (``bench --mix``): what it accepts, how each wrong file is refused (one line naming the
file and the tenant), and the seeded assignment of requests to tenants."""

from __future__ import annotations

import itertools
import os
from collections import Counter
from pathlib import Path

import pytest

from tokometer.datasets.files import FixedSource
from tokometer.datasets.mix import MAX_MIX_FILE_BYTES, MAX_TENANTS, MixSource, TenantMix, read_mix
from tokometer.datasets.synthetic import SyntheticSource
from tokometer.util.errors import ConfigError

GOOD = """
[[tenant]]
name = "chat"
share = 0.7
input_tokens = 32
slo_ttft_ms = 500

[[tenant]]
name = "summarise"
share = 0.3
model = "summary-lora"
dataset = "prompts.jsonl"
output_tokens = 64
slo_e2e_ms = 8000
headers = { "x-tenant" = "acme", "Authorization" = "Bearer sk-tenant" }
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mix.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_good_file_reads_whole(tmp_path: Path) -> None:
    mix = read_mix(_write(tmp_path, GOOD))
    assert mix.names() == ["chat", "summarise"]
    chat, summary = mix.tenants
    assert chat.share == 0.7 and chat.input_tokens == 32 and chat.slo_ttft_ms == 500 and chat.model is None
    assert summary.model == "summary-lora" and summary.output_tokens == 64
    assert summary.dataset == tmp_path / "prompts.jsonl"  # relative to the mix file, as its reader expects
    assert mix.weights() == pytest.approx([0.7, 0.3]) and mix.total_rate is None
    saved = mix.model_dump()  # as the run saves it: the secret header redacted
    assert saved["tenants"][1]["headers"] == {"x-tenant": "acme", "Authorization": "<redacted>"}


def test_percentages_and_rates(tmp_path: Path) -> None:
    mix = read_mix(_write(tmp_path, '[[tenant]]\nname="a"\nshare=60\n[[tenant]]\nname="b"\nshare=40\n'))
    assert mix.weights() == pytest.approx([0.6, 0.4])
    rated = read_mix(_write(tmp_path, '[[tenant]]\nname="a"\nrate=1\n[[tenant]]\nname="b"\nrate=3\n'))
    assert rated.total_rate == 4 and rated.weights() == pytest.approx([0.25, 0.75])


@pytest.mark.parametrize(("text", "said"), [
    ('[[tenant]]\nname="a"\nshare=1\nfoo=2\n', "tenant 1 ('a'): foo: unknown key: the keys are name, share"),
    ('[[tenant]]\nname="a"\nshare=0.5\n[[tenant]]\nname="a"\nshare=0.5\n', "two tenants are named 'a'"),
    ('[[tenant]]\nname="a"\nshare=1\n[[tenant]]\nname="b"\nshare=1\n', "the shares add up to 2: give fractions"),
    ('[[tenant]]\nname="a"\nshare=0.2\n', "the shares add up to 0.2"),
    ('[[tenant]]\nname="a"\nshare=1\n[[tenant]]\nname="b"\nrate=1\n', "some tenants give a share and some a rate"),
    ('[[tenant]]\nname="a"\nrate=9e8\n[[tenant]]\nname="b"\nrate=9e8\n', "the tenants' rates add up to 1.8e+09"),
    ('[[tenant]]\nname="a"\n', "tenant 1 ('a'): give share (its part of the traffic) or rate"),
    ('[[tenant]]\nname="a"\nshare=1\nrate=2\n', "give share (its part of the traffic) or rate"),
    ('[[tenant]]\nname="a"\nshare=-1\n', "tenant 1 ('a'): share: Input should be greater than 0"),
    ('[[tenant]]\nname="a"\nshare=nan\n', "tenant 1 ('a'): share:"),
    ('[[tenant]]\nname=""\nshare=1\n', "tenant 1: name:"),
    ('[[tenant]]\nname="a\\nb"\nshare=1\n', "give one line of printable text"),
    ('[[tenant]]\nname="a"\nshare=1\nprompt="hi"\ninput_tokens=5\n', "give one prompt source"),
    ('[[tenant]]\nname="a"\nshare=1\nheaders={"Content-Length"="5"}\n', "written by the client itself"),
    ('[[tenant]]\nname="a"\nshare=1\nheaders={"x"="a\\r\\nb"}\n', "line break"),
    ('[[tenant]]\nname="a"\nshare=1\nslo_ttft_ms=0\n', "slo_ttft_ms: Input should be greater than 0"),
    ('[[tenant]]\nname="a"\nshare=1\ninput_tokens=99999999999\n', "input_tokens:"),
    ("tenant = 3\n", "no [[tenant]] tables"),
    ('other = 1\n[[tenant]]\nname="a"\nshare=1\n', "unknown key 'other' at the top level"),
    ("[[tenant\n", "not valid TOML"),
    ('[[tenant]]\nname=["a"]\nshare=1\n', "tenant 1: name: Input should be a valid string"),
])
def test_each_wrong_file_is_one_line_naming_it(tmp_path: Path, text: str, said: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        read_mix(path)
    message = str(raised.value)
    assert message.startswith(f"--mix {path}") or message.startswith(str(path)), message
    assert said in message and "\n" not in message, message


def test_too_many_tenants_and_huge_files_and_fifos(tmp_path: Path) -> None:
    many = "".join(f'[[tenant]]\nname="t{i}"\nshare={1 / (MAX_TENANTS + 1)!r}\n' for i in range(MAX_TENANTS + 1))
    with pytest.raises(ConfigError, match=f"a mix holds at most {MAX_TENANTS}"):
        read_mix(_write(tmp_path, many))
    huge = _write(tmp_path, "#" * (MAX_MIX_FILE_BYTES + 1))
    with pytest.raises(ConfigError, match="is larger than 1 MiB"):
        read_mix(huge)
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)  # nobody writes: reads as empty at once, never waits for a writer
    with pytest.raises(ConfigError, match="no \\[\\[tenant\\]\\] tables"):
        read_mix(fifo)
    with pytest.raises(ConfigError, match="not UTF-8"):
        read_mix(_bytes(tmp_path, b'[[tenant]]\nname="\xff"\n'))


def _bytes(tmp_path: Path, raw: bytes) -> Path:
    path = tmp_path / "raw.toml"
    path.write_bytes(raw)
    return path


def _mix(weights: list[float]) -> TenantMix:
    return TenantMix.model_validate({"tenants": [{"name": f"t{i}", "share": w} for i, w in enumerate(weights)]})


def test_the_assignment_is_the_seeds_and_follows_the_shares() -> None:
    mix = _mix([0.7, 0.2, 0.1])
    sources = [FixedSource(f"prompt {i}") for i in range(3)]
    first = list(itertools.islice(MixSource(mix, sources, seed=7).assignment(), 5000))
    again = list(itertools.islice(MixSource(mix, sources, seed=7).assignment(), 5000))
    other = list(itertools.islice(MixSource(mix, sources, seed=8).assignment(), 5000))
    assert first == again and first != other
    counts = Counter(first)
    for k, share in enumerate((0.7, 0.2, 0.1)):  # within 4 standard deviations of the binomial
        assert abs(counts[k] - 5000 * share) < 4 * (5000 * share * (1 - share)) ** 0.5, counts


def test_prompts_carry_their_tenant_model_headers_and_length() -> None:
    mix = TenantMix.model_validate({"tenants": [
        {"name": "base", "share": 0.5},
        {"name": "lora", "share": 0.5, "model": "adapter-a", "output_tokens": 16, "headers": {"x-tenant": "acme"}}]})
    source = MixSource(mix, [FixedSource("base prompt"), SyntheticSource(8, seed=1)], seed=3)
    prompts = list(itertools.islice(source.prompts(), 40))
    assert {p.tenant for p in prompts} == {"base", "lora"}
    for p in prompts:
        if p.tenant == "base":
            assert p.text == "base prompt" and p.model is None and p.headers == () and p.max_tokens is None
        else:
            assert p.model == "adapter-a" and p.headers == (("x-tenant", "acme"),)
            assert p.max_tokens == 16 and p.exact_length
    lora = [p.text for p in prompts if p.tenant == "lora"]
    assert len(set(lora)) == len(lora)  # the tenant's own source goes on from prompt to prompt
