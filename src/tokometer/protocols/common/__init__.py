"""What every protocol shares and none owns: the client's base (`base`), the event splitter for SSE and NDJSON
(`framing`), the number readers (`numbers`), text gathered in pieces (`pieces`), reasoning inline between
``<think>`` tags (`reasoning`), images (`images`), the media-type check (`mediatype`), tool-call pieces
(`chat_tools`, `toolcalls`, `tool_events`), the simulator's server base (`server`), the writer interface
(`writer`) and the description of a protocol the registry holds (`protocol`).
"""
