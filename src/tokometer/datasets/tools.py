"""Tool definitions for a tool-call workload (``bench --tools N``): OpenAI chat ``tools`` of ``function`` type.

The first ``N`` of a fixed list of plausible functions (weather, search, calendar, ...), each with a JSON
Schema of its parameters, as agents send them. Past the list the names are numbered
(``lookup_record_11``) so that any ``N`` up to `MAX_TOOLS` is distinct. What the definitions cost is
prompt tokens: a server puts them in the chat template, so the prompt the server counts grows with ``N``.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["MAX_TOOLS", "tool_definitions"]

MAX_TOOLS: Final = 128

_BASE: Final[tuple[tuple[str, str, dict[str, str]], ...]] = (
    ("get_weather", "Get the current weather for a city.", {"city": "The city name", "unit": "celsius or fahrenheit"}),
    ("search_web", "Search the web and return the top results.", {"query": "What to search for"}),
    ("create_event", "Create a calendar event.", {"title": "Event title", "start": "ISO 8601 start time",
                                                   "duration_minutes": "Length in minutes"}),
    ("send_email", "Send an email.", {"to": "Recipient address", "subject": "Subject line", "body": "Message body"}),
    ("read_file", "Read a file from the workspace.", {"path": "Path of the file"}),
    ("run_sql", "Run a read-only SQL query.", {"query": "The SQL statement"}),
    ("convert_currency", "Convert an amount between currencies.", {"amount": "Amount", "from": "ISO code",
                                                                    "to": "ISO code"}),
    ("get_stock_price", "Get a stock's latest price.", {"ticker": "The ticker symbol"}),
)


def tool_definitions(n: int) -> tuple[dict[str, Any], ...]:
    """``n`` distinct tool definitions (0 to `MAX_TOOLS`), the same for every run."""
    if not 0 <= n <= MAX_TOOLS:
        raise ValueError(f"--tools must be from 0 to {MAX_TOOLS}")
    tools = []
    for i in range(n):
        name, description, fields = _BASE[i % len(_BASE)]
        if i >= len(_BASE):
            name, description = f"{name}_{i}", f"{description} (variant {i})"
        properties = {key: {"type": "string", "description": text} for key, text in fields.items()}
        tools.append({"type": "function", "function": {
            "name": name, "description": description,
            "parameters": {"type": "object", "properties": properties, "required": list(fields)[:1]}}})
    return tuple(tools)
