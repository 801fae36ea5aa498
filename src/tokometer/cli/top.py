"""``tokometer top URL``: a live view of a running inference server, from its own ``/metrics`` and its GPUs.

The sources are read on a thread (`tokometer.observe.watch`); each ``--interval`` the frame of the
last ``--window`` (`tokometer.observe.top`) is drawn with rich's ``Live`` (`tokometer.report.top`).
Not on a terminal, a frame is printed each interval, one after another. ``--once`` reads twice,
``--interval`` apart, prints that frame (``--json``: as JSON) and exits. Ctrl-C ends the view (exit 0);
SIGTERM too, with the exit status a process ended by it has (143), as every command does.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import click

from tokometer.cli.options import parse_duration
from tokometer.util.jsontext import dumps

if TYPE_CHECKING:
    from rich.console import Console

    from tokometer.observe.watch import Watch

__all__ = ["command"]


@click.command("top")
@click.argument("url")
@click.option("--interval", default="1s", show_default=True, help="How often the server is read and the view drawn.")
@click.option("--window", default="30s", show_default=True,
              help="The sliding window of rates, percentiles and history (at least two intervals).")
@click.option("--gpu-metrics", default="auto", show_default=True, metavar="auto|nvml|off|URL",
              help="GPU telemetry: NVML for a server on this machine, or a DCGM exporter's /metrics URL.")
@click.option("--once", is_flag=True, help="Read twice, --interval apart, print that one frame and exit.")
@click.option("--json", "as_json", is_flag=True, help="With --once: print the frame as JSON.")
def command(url: str, interval: str, window: str, gpu_metrics: str, once: bool, as_json: bool) -> None:
    """Live view of a running server: requests running and waiting, KV cache, tok/s, TTFT and ITL/TPOT
    percentiles over a sliding window, preemptions, GPUs (utilisation, memory, power) with history.

    URL is the server's base URL (its /metrics at that origin is read) or a /metrics URL. Works with
    vLLM, SGLang, llama.cpp (started with --metrics), TGI, tokometer's gateway and simulator.
    """
    from tokometer.cli.output import make_console
    from tokometer.cli.terminate import Terminate
    from tokometer.observe.watch import Watch
    from tokometer.report.top import render_top
    from tokometer.util.errors import ConfigError

    interval_s = parse_duration(interval, "--interval", bounded=True)
    window_s = parse_duration(window, "--window", bounded=True)
    assert interval_s is not None and window_s is not None
    if as_json and not once:
        raise ConfigError("--json: only with --once (a live view is for a terminal)")
    if not once and window_s < 2 * interval_s:
        raise ConfigError(f"--window {window}: at least two --interval ({interval}) long, so that rates exist")

    with Terminate() as terminate:  # SIGTERM leaves the view as Ctrl-C does (the screen restored), exit 143
        watch = Watch.open(url, interval_s, gpu_metrics, start=not once)
        console = make_console()
        if watch.gpu_note:
            make_console(stderr=True).print(watch.gpu_note, markup=False)
        try:
            if once:
                view = watch.once(interval_s)
                if as_json:
                    click.echo(dumps(view.to_json(), indent=2))
                else:
                    console.print(render_top(view))
                return
            _live(watch, console, interval_s, window_s)
        except KeyboardInterrupt:
            if terminate.received:
                raise
            # Ctrl-C is how a live view ends: exit 0
        finally:
            watch.stop()


def _live(watch: Watch, console: Console, interval_s: float, window_s: float) -> None:
    """Draw a frame every ``interval_s`` until Ctrl-C (a terminal: in place, on the alternate screen)."""
    from rich.live import Live

    from tokometer.report.top import render_top

    next_at = time.monotonic()
    if not console.is_terminal:
        while True:
            console.print(render_top(watch.view(window_s), interval_s))
            console.print()
            next_at += interval_s
            time.sleep(max(0.0, next_at - time.monotonic()))
    with Live(render_top(watch.view(window_s), interval_s), console=console, auto_refresh=False, screen=True,
              transient=True) as live:
        while True:
            next_at += interval_s
            time.sleep(max(0.0, next_at - time.monotonic()))
            live.update(render_top(watch.view(window_s), interval_s), refresh=True)
