"""What tokometer's servers (the gateway and the simulator) take from their clients, bounded once for both.

- `request_limits`: the one table of limits of a request: head, body bytes and time, chunked framing,
  connections, JSON depth and strings, and the counts and sizes of fields (messages, tools, stop sequences,
  logit_bias entries, content parts, names, inputs);
- `connections`: uvicorn's HTTP protocol with those limits on request lines (HTTP/1.0 and 1.1 only), heads,
  pipelining, chunked framing, the whole body's time, and connections (400, 505, 431, 413, 408, 503; slow
  senders make room for clients that send at once);
- `body`: reading a request body within its size and time limits (413, 408);
- `jsonbody`: a body as a JSON object of bounded depth and strings (400 otherwise);
- `shapes`: the pieces each protocol declares its request's shape with (``tokometer.protocols.<name>.request``,
  the registry's ``Protocol.request``), and `shapes.check`, which both servers run on every body before any
  other work (400 in the client's own error shape);
- `cheap`: ``/metrics`` and ``/health`` rendered at most so often that a flood of them cannot slow streams.
"""
