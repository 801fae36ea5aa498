"""``python -m tokometer``."""

from tokometer.cli import main

main()
