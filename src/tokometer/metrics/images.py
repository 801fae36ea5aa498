"""`ImageSummary`: a step's images, for requests that sent them (``bench --images``).

Present only when the step's requests sent images. ``image_tokens`` is what the server said its images
cost in prompt tokens (``usage.prompt_tokens_details.image_tokens``), per answer that said; a server that
does not say leaves it unknown (``reported`` 0): it is never guessed from the prompt count, which also
holds the chat template. An image's prefill is in TTFT like the text's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tokometer.metrics.distribution import Distribution
from tokometer.records import RequestRecord

__all__ = ["ImageSummary", "summarize_images"]


@dataclass(slots=True)
class ImageSummary:
    """Images over a step's completed requests."""

    requests: int
    """Completed requests that sent images."""
    images_total: int
    reported: int
    """Of those, answers whose usage said how many prompt tokens were images."""
    image_tokens: Distribution
    """Per answer that said."""

    def to_json(self) -> dict[str, Any]:
        return {"requests": self.requests, "images": self.images_total, "reported": self.reported,
                "image_tokens": self.image_tokens.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ImageSummary:
        """The summary `to_json` wrote."""
        return cls(requests=int(data.get("requests") or 0), images_total=int(data.get("images") or 0),
                   reported=int(data.get("reported") or 0),
                   image_tokens=Distribution.from_json(data.get("image_tokens")))

    def line(self) -> str:
        """The summary in one sentence (the console's)."""
        head = f"images: {self.images_total} sent in {self.requests} requests"
        if not self.reported:
            return head + "; image tokens unknown (the server's usage did not say)"
        mean = self.image_tokens.mean or 0.0
        return (head + f"; {mean:,.1f} prompt tokens were images per request on average "
                f"(usage.prompt_tokens_details.image_tokens, {self.reported} answers said)")


def summarize_images(ok: Sequence[RequestRecord]) -> ImageSummary | None:
    """The image summary of a step's completed requests; ``None`` when none sent an image."""
    sent = [r for r in ok if r.images]
    if not sent:
        return None
    told = [float(r.image_tokens) for r in sent if r.image_tokens is not None]
    return ImageSummary(requests=len(sent), images_total=sum(r.images or 0 for r in sent), reported=len(told),
                        image_tokens=Distribution.of(told))
