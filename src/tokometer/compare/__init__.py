"""`tokometer compare BASE NEW`: two saved runs judged metric by metric (`gate`: the noise-aware regression gate,
its verdicts and exit status)."""
