"""What tokometer's servers (the gateway and the simulator) take from their clients, bounded once for both.

- `request_limits`: the default limits of a request: head and body size, head and body time, connections;
- `connections`: uvicorn's HTTP protocol with those limits on heads and connections (431, 408, 503);
- `body`: reading a request body within its size and time limits (413, 408);
- `jsonbody`: a body as a JSON object of bounded depth (400 otherwise).

The checks of a request's fields are the protocol's, in `tokometer.protocols` (`tokometer.protocols.openai.request`).
"""
