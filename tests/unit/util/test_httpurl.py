"""Every http(s) URL a user hands over meets one check where it comes in (`tokometer.util.httpurl`): a URL the
parser refuses (an IPv6 host's bracket left open, a port that is no number or past 65535) had been a ValueError's
traceback at the first request in `bench` and `top`; now each reader says what is wrong in one line."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from tokometer.benchmark.spec import BenchSpec
from tokometer.doctor.spec import DoctorSpec
from tokometer.gateway.config import UpstreamConfig
from tokometer.observe.gpu_source import gpu_reader
from tokometer.observe.watch import metrics_url
from tokometer.util.errors import ConfigError
from tokometer.util.httpurl import http_url_problem

BAD = [
    ("http://[::1", r"is not a well-formed URL \(Invalid IPv6 URL\)"),
    ("http://host:99999", r"is not a well-formed URL \(Port out of range 0-65535\)"),
    ("http://host:abc/v1", r"is not a well-formed URL \(Port could not be cast"),
    ("http://", r"names no host"),
    ("https://:8000/v1", r"names no host"),
    ("http://a b", r"holds a space or a control character"),
    ("http://host\n/v1", r"holds a space or a control character"),
    ("ftp://host", r"must start with http:// or https://"),
]


@pytest.mark.parametrize(("url", "problem"), BAD)
def test_each_problem_is_named(url: str, problem: str) -> None:
    said = http_url_problem(url)
    assert said is not None and re.match(problem, said)


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/v1", "https://host/v1/chat", "http://[::1]:8000",
                                 "http://localhost", "https://h.example:443/p?q=1"])
def test_well_formed_urls_pass(url: str) -> None:
    assert http_url_problem(url) is None


@pytest.mark.parametrize(("url", "problem"), BAD)
def test_every_reader_of_a_url_refuses_it_by_the_same_words(url: str, problem: str) -> None:
    for make in (lambda: BenchSpec(url=url), lambda: DoctorSpec(url=url),
                 lambda: UpstreamConfig(name="u", url=url, model="m")):
        with pytest.raises(ValidationError, match=problem):
            make()
    if url.startswith(("http://", "https://")):  # top takes a bare host:port as http://
        with pytest.raises(ConfigError, match=problem):
            metrics_url(url)
        with pytest.raises(ConfigError, match=problem):
            gpu_reader(url, local=False)
