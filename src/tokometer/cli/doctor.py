"""``tokometer doctor``: why is a server slow, why does it fail: a battery of checks, each a finding with a fix."""

from __future__ import annotations

from typing import Any

import click

from tokometer.cli.options import FiniteFloat, api_key_option, build_spec
from tokometer.protocols.registry import PROTOCOLS
from tokometer.util.jsontext import dumps
from tokometer.util.limits import MAX_SECONDS, MIN_SECONDS

__all__ = ["command"]


@click.command("doctor")
@click.argument("url")
@click.option("--api", type=click.Choice(sorted(PROTOCOLS)), default=None,
              help="Protocol the server speaks [default: ollama for a URL on port 11434, else openai-chat].")
@click.option("--model", default="", help="Model name to ask for (default: the first one the server lists).")
@click.option("--api-key", callback=api_key_option, envvar="TOKOMETER_API_KEY", default=None,
              help="Bearer token (or TOKOMETER_API_KEY).")
@click.option("--hardware", default=None,
              help="What the server runs on ('tokometer estimate --list-hardware', or host): compare its speed "
                   "with the roofline estimate.")
@click.option("--estimate-model", default=None,
              help="The model for the estimate when the served name is not one 'tokometer estimate' knows.")
@click.option("--tokenizer", default="auto", show_default=True,
              help="The model's tokenizer for the prompt-token check: auto (the server's /tokenize), none, or "
                   "anything 'tokometer count --tokenizer' takes.")
@click.option("--quick", is_flag=True, help="Skip what takes time: the load, the prefix-cache pair, the context "
              "probes and the disk read (a few seconds in all).")
@click.option("--timeout", "timeout_s", type=FiniteFloat(MIN_SECONDS, MAX_SECONDS), default=60.0, show_default=True,
              help="Limit of one request, in seconds.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (tokometer.doctor/1) on stdout.")
def command(**opts: Any) -> int:
    """Examine the inference server at URL: reach, auth, context and truncation, streaming, speed, server, host.

    \b
    Every finding has a severity (info, warning, error), its evidence and a fix.
    Exit status: 0 healthy (nothing above info), 1 a warning or an error, 2 could not run (bad input).
    URL is the base URL a client uses, e.g. http://127.0.0.1:8000/v1.
    """
    from tokometer.doctor import DoctorSpec, run_doctor

    spec = build_spec(DoctorSpec, url=opts["url"], api=opts["api"], model=opts["model"], api_key=opts["api_key"],
                      hardware=opts["hardware"], estimate_model=opts["estimate_model"], tokenizer=opts["tokenizer"],
                      quick=opts["quick"], timeout_s=opts["timeout_s"])
    import uvloop

    report = uvloop.run(run_doctor(spec))
    if opts["as_json"]:
        click.echo(dumps(report.to_json(), indent=2, default=str))
    else:
        from tokometer.cli.output import make_console
        from tokometer.doctor.render import render_report

        render_report(make_console(), report)
    return report.exit_status
