"""Images in OpenAI chat requests: the data-URL content part, reading an image's size, and the token rule.

A chat message's ``content`` may hold ``{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}``
parts (OpenAI's API reference; vLLM, SGLang and llama.cpp's server take the same). `image_part` writes one
(its URL made by `tokometer.datasets.images.data_url`); `image_size` reads the width and height of a PNG
or JPEG data URL from its header alone (the first
`_HEADER_BYTES` bytes decoded at most: bounded whatever the image's size).

`qwen2_vl_image_tokens` is the simulator's rule for an image's prompt tokens: Qwen2-VL's (and Qwen2.5-VL's)
``smart_resize`` (transformers' ``image_processing_qwen2_vl.py``) refuses an aspect ratio above 200, rounds
each side to a multiple of 28 and keeps the pixels between 56*56 and 28*28*1280, and every 28x28 block (2x2
patches of 14x14 merged) is one ``<|image_pad|>`` token; the ``<|vision_start|>``/``<|vision_end|>`` markers
around them are not counted.
A 448x448 image is 256 tokens; 1024x768 is 999; 1024x1024, scaled down to 980x980, is 1,225.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from typing import Any, Final

__all__ = ["MAX_ASPECT_RATIO", "image_part", "image_parts", "image_size", "qwen2_vl_image_tokens"]

_HEADER_BYTES: Final = 64 * 1024
"""Bytes of an image decoded to find its size (a JPEG's frame header comes after its tables: well inside this)."""

_DATA_URL = re.compile(r"data:image/(png|jpeg|jpg);base64,", re.IGNORECASE)

_FACTOR: Final = 28
_MIN_PIXELS: Final = 56 * 56
_MAX_PIXELS: Final = 28 * 28 * 1280
MAX_ASPECT_RATIO: Final = 200
"""The longer side over the shorter one at most (``smart_resize``'s ``MAX_RATIO``): more is refused (a 400)."""


def image_part(url: str) -> dict[str, Any]:
    """One OpenAI chat content part carrying the image at ``url``."""
    return {"type": "image_url", "image_url": {"url": url}}


def image_parts(content: Any) -> list[str]:
    """The ``url`` of every image part of a message's ``content`` (a string has none)."""
    if not isinstance(content, list):
        return []
    urls = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            urls.append(url if isinstance(url, str) else "")
    return urls


def image_size(url: str) -> tuple[int, int] | None:
    """(width, height) of a PNG or JPEG ``data:`` URL, from its header; None when it is not one or cannot be read."""
    match = _DATA_URL.match(url)
    if match is None:
        return None
    start = match.end()
    head = url[start:start + _HEADER_BYTES * 4 // 3]
    head = head[:len(head) // 4 * 4]
    try:
        data = base64.b64decode(head, validate=True)
    except (binascii.Error, ValueError):
        return None
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and len(data) >= 24:
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if data[:2] == b"\xff\xd8":
        return _jpeg_size(data)
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        length = int.from_bytes(data[i + 2:i + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a start-of-frame segment
            height = int.from_bytes(data[i + 5:i + 7], "big")
            width = int.from_bytes(data[i + 7:i + 9], "big")
            return width, height
        if length < 2:
            return None
        i += 2 + length
    return None


def qwen2_vl_image_tokens(width: int, height: int) -> int:
    """Prompt tokens of a ``width`` x ``height`` image by Qwen2-VL's rule (see the module docstring).

    ValueError for an aspect ratio above `MAX_ASPECT_RATIO`, as ``smart_resize`` refuses it (a PNG header
    claiming 1 x 4,294,967,295 pixels would otherwise be 2,344,687 tokens)."""
    if width < 1 or height < 1:
        return 0
    if max(width, height) / min(width, height) > MAX_ASPECT_RATIO:
        raise ValueError(f"image_url: an image of {width}x{height} pixels has an aspect ratio above "
                         f"{MAX_ASPECT_RATIO}, which Qwen2-VL does not take")
    h = max(_FACTOR, round(height / _FACTOR) * _FACTOR)
    w = max(_FACTOR, round(width / _FACTOR) * _FACTOR)
    if h * w > _MAX_PIXELS:
        beta = math.sqrt(height * width / _MAX_PIXELS)
        h = max(_FACTOR, math.floor(height / beta / _FACTOR) * _FACTOR)
        w = max(_FACTOR, math.floor(width / beta / _FACTOR) * _FACTOR)
    elif h * w < _MIN_PIXELS:
        beta = math.sqrt(_MIN_PIXELS / (height * width))
        h = math.ceil(height * beta / _FACTOR) * _FACTOR
        w = math.ceil(width * beta / _FACTOR) * _FACTOR
    return (h // _FACTOR) * (w // _FACTOR)
