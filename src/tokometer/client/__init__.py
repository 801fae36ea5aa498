"""The measuring client: tokometer's own HTTP/1.1 transport (`http1`, with `tls` and `proxy`), `probe`
requests, the `streamclient` request that stamps every byte, and `assemble` turning a finished stream into
a `RequestRecord` (with `plausible` judging the server's counts). The protocols it speaks are in
`tokometer.protocols` (their registry: `tokometer.protocols.registry`)."""
