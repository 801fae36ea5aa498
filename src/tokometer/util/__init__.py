"""Leaf utilities every package may use: files written whole, bounded reads and requests, the cache directory,
clocks, errors, JSON text, limits, units, secrets in headers, the host, the GGUF reader. They import no other
package of tokometer."""
