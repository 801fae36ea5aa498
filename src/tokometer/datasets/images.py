"""Synthetic images for chat requests (``bench --images N --image-size WxH``), made with Pillow.

Each image is deterministic for (seed, prompt, image): blocks of 16x16 pixels of seeded random colours,
so no two requests send the same image (a server's image cache cannot answer a repeat) while a JPEG of
them stays about the size of a photo's. Sent as ``data:`` URLs in OpenAI chat content parts
(`tokometer.protocols.common.images`). What an image costs the server (its vision encoder and its prompt tokens)
depends only on its pixel size, never on what it shows, so noise is a fair stand-in for a photo.

Bounds: sides from `MIN_SIDE` to `MAX_SIDE` pixels, at most `MAX_IMAGES` images a request, and at most
`MAX_REQUEST_BYTES` of encoded images a request (larger is refused before anything is sent).
"""

from __future__ import annotations

import base64
import io
import re
from dataclasses import dataclass
from typing import Any, Final, Literal

from tokometer.util.errors import ConfigError

__all__ = ["MAX_IMAGES", "MAX_REQUEST_BYTES", "MAX_SIDE", "MIN_SIDE", "ImageFormat", "ImageSpec", "data_url",
           "make_images", "parse_image_size"]

MIN_SIDE: Final = 16
MAX_SIDE: Final = 4096
MAX_IMAGES: Final = 16
MAX_REQUEST_BYTES: Final = 32 * 1024 * 1024
_BLOCK = 16

ImageFormat = Literal["png", "jpeg"]


@dataclass(frozen=True, slots=True)
class ImageSpec:
    """``count`` images of ``width`` x ``height`` pixels in every request, encoded as ``format``."""

    count: int
    width: int
    height: int
    format: ImageFormat = "jpeg"

    def describe(self) -> str:
        return f"{self.count} {self.format} image{'s' if self.count > 1 else ''} of {self.width}x{self.height}"


def data_url(image: bytes, kind: str) -> str:
    """``image`` (PNG or JPEG bytes) as a ``data:`` URL (what `tokometer.protocols.common.images.image_size` reads)."""
    return f"data:image/{kind};base64," + base64.b64encode(image).decode("ascii")


def parse_image_size(text: str) -> tuple[int, int]:
    """``WxH`` (``1024x768``) as (width, height), each side from `MIN_SIDE` to `MAX_SIDE`."""
    match = re.fullmatch(r"\s*(\d{1,6})\s*[xX×]\s*(\d{1,6})\s*", text)
    if match is None:
        raise ConfigError(f"--image-size {text!r}: give WIDTHxHEIGHT in pixels, e.g. 1024x768")
    width, height = int(match[1]), int(match[2])
    if not (MIN_SIDE <= width <= MAX_SIDE and MIN_SIDE <= height <= MAX_SIDE):
        raise ConfigError(f"--image-size {text}: each side must be from {MIN_SIDE} to {MAX_SIDE} pixels")
    return width, height


def _pillow() -> Any:
    try:
        from PIL import Image
    except ImportError:
        raise ConfigError("--images needs Pillow to draw the images: pip install 'tokometer[images]'") from None
    return Image


def make_images(spec: ImageSpec, seed: int, prompt: int) -> tuple[str, ...]:
    """The ``spec.count`` images of prompt number ``prompt``, as data URLs."""
    import numpy as np

    image_module = _pillow()
    urls = []
    total = 0
    for n in range(spec.count):
        rng = np.random.default_rng([seed & 0xFFFFFFFF, prompt, n])
        small = rng.integers(0, 256, size=(-(-spec.height // _BLOCK), -(-spec.width // _BLOCK), 3), dtype=np.uint8)
        pixels = small.repeat(_BLOCK, axis=0).repeat(_BLOCK, axis=1)[:spec.height, :spec.width]
        buffer = io.BytesIO()
        image = image_module.fromarray(pixels, "RGB")
        if spec.format == "jpeg":
            image.save(buffer, "JPEG", quality=90)
        else:
            image.save(buffer, "PNG")
        total += buffer.tell()
        if total > MAX_REQUEST_BYTES:
            raise ConfigError(f"{spec.describe()} come to more than {MAX_REQUEST_BYTES // 2**20} MiB a request: "
                              "send fewer or smaller images")
        urls.append(data_url(buffer.getvalue(), spec.format))
    return tuple(urls)
