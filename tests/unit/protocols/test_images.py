"""`tokometer.protocols.common.images` and `tokometer.datasets.images`:
images drawn, sized from their header, and counted."""

from __future__ import annotations

import pytest

from tokometer.datasets.images import ImageFormat, ImageSpec, data_url, make_images, parse_image_size
from tokometer.protocols.common.images import image_parts, image_size, qwen2_vl_image_tokens
from tokometer.protocols.openai.client import OpenAIChat
from tokometer.util.errors import ConfigError


@pytest.mark.parametrize("fmt", ["png", "jpeg"])
def test_drawn_images_are_deterministic_distinct_and_read_back_at_their_size(fmt: ImageFormat) -> None:
    spec = ImageSpec(2, 300, 200, fmt)
    first = make_images(spec, seed=7, prompt=0)
    assert first == make_images(spec, seed=7, prompt=0)
    assert first[0] != first[1] and first != make_images(spec, seed=7, prompt=1)
    assert all(url.startswith(f"data:image/{fmt};base64,") for url in first)
    assert [image_size(url) for url in first] == [(300, 200), (300, 200)]


def test_the_qwen2_vl_rule() -> None:
    assert qwen2_vl_image_tokens(448, 448) == 256  # 16 x 16 blocks of 28 pixels
    assert qwen2_vl_image_tokens(1024, 768) == 37 * 27
    assert qwen2_vl_image_tokens(1024, 1024) == 35 * 35  # over 28*28*1280 pixels: scaled down
    assert qwen2_vl_image_tokens(16, 16) == 4  # under 56*56: scaled up to 56x56


def test_what_cannot_be_sized_is_none() -> None:
    assert image_size("https://example.com/a.png") is None
    assert image_size("data:image/png;base64,!!!!") is None
    assert image_size(data_url(b"GIF89a" + b"\0" * 40, "png")) is None
    assert image_parts("text") == []
    assert image_parts([{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "u"}}]) == ["u"]


def test_sizes_are_checked() -> None:
    assert parse_image_size("1024x768") == (1024, 768)
    for bad in ("1024", "0x10", "5000x10", "axb"):
        with pytest.raises(ConfigError, match="--image-size"):
            parse_image_size(bad)


def test_image_tokens_come_from_usage_where_the_server_says() -> None:
    chat = OpenAIChat()
    said = chat.parse(b'{"choices": [], "usage": {"prompt_tokens": 300, "completion_tokens": 2, '
                      b'"prompt_tokens_details": {"image_tokens": 256}}}')
    per_modality = chat.parse(b'{"choices": [], "usage": {"prompt_tokens": 300, "completion_tokens": 2, '
                              b'"prompt_tokens_details": {"multimodal_tokens": {"image": 255}}}}')
    silent = chat.parse(b'{"choices": [], "usage": {"prompt_tokens": 300, "completion_tokens": 2}}')
    absurd = chat.parse(b'{"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, '
                        b'"prompt_tokens_details": {"image_tokens": -4}}}')
    assert said is not None and said.image_tokens == 256
    assert per_modality is not None and per_modality.image_tokens == 255
    assert silent is not None and silent.image_tokens is None
    assert absurd is not None and absurd.image_tokens is None
    assert "image_tokens=-4 (negative)" in (absurd.rejected or "")


def test_aspect_ratios_past_200_are_refused_as_qwen2_vl_refuses_them() -> None:
    import base64

    assert qwen2_vl_image_tokens(200 * 28, 28) > 0 and qwen2_vl_image_tokens(28, 200 * 28) > 0  # 200: taken
    for width, height in ((1, 4294967295), (4294967295, 1), (201, 1)):
        with pytest.raises(ValueError, match="aspect ratio"):
            qwen2_vl_image_tokens(width, height)
    # a PNG header claiming 1 x 4294967295 (2,344,687 tokens before): the simulator's request is a 400
    png = (b"\x89PNG\r\n\x1a\n" + b"\0\0\0\x0dIHDR" + (1).to_bytes(4, "big") + (2**32 - 1).to_bytes(4, "big")
           + b"\x08\x02\0\0\0" + b"\0" * 4)
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    assert image_size(url) == (1, 2**32 - 1)
    from tokometer.protocols.openai.server import OpenAIChatServer

    body = {"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}]}
    with pytest.raises(ValueError, match="aspect ratio above 200"):
        OpenAIChatServer().read(body, "m", lambda text: len(text.split()))
