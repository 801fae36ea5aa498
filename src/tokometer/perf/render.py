"""Console output of `tokometer estimate`: rich tables for an estimate, a target answer, a run's efficiency."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tokometer.perf.efficiency import RunEfficiency, StepEfficiency
from tokometer.perf.estimate import Estimate
from tokometer.perf.explain import fmt_bytes
from tokometer.perf.lengthsfile import RequestLengths
from tokometer.perf.quant import normalize_dtype, weight_dtype
from tokometer.perf.roofline import FIT_GEMM_FRACTION, Deployment, weight_bytes_read
from tokometer.perf.target import TargetAnswer
from tokometer.perf.trackrecord import FEW_USERS
from tokometer.util.shown import clipped
from tokometer.util.units import GIB

if TYPE_CHECKING:
    from tokometer.perf.closedloop import ClosedLoop
    from tokometer.perf.hardwarespec import HardwareSpec
    from tokometer.perf.measuredloop import LoopBeside
    from tokometer.perf.model import ModelSpec
    from tokometer.perf.roofline import Deployment

__all__ = ["render_estimate", "render_hardware", "render_models", "render_run", "render_target"]


def _ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:,.3g}" if ms < 10 else f"{ms:,.1f}" if ms < 1000 else f"{ms:,.0f}"


def _tok(rate: float) -> str:
    return f"{rate:,.1f}" if rate < 1000 else f"{rate:,.0f}"


def _pair(bound: str, expected: str) -> str:
    return f"{bound} → {expected}"


def _efficiency_line(e: Estimate) -> str:
    f = e.efficiency
    overhead = f", {f.layer_overhead_s * 1e6:,.0f} µs a layer each step" if f.layer_overhead_s else ""
    hw, scale = e.deployment.hardware, e.deployment.compute_scale
    if scale != 1:
        overhead += (f", FLOP/s shares × {scale:.2f} on {hw.name} (its dense GEMM sustains {hw.gemm_fraction:.0%} "
                     f"of its datasheet, the fit's GPUs {FIT_GEMM_FRACTION:.0%})")
    if e.deployment.model.is_moe and f.expert_half_width:
        share = f.expert_share(e.deployment.expert_gemm_width)
        overhead += f", routed experts' matmuls at {share:.0%} of that"
    return (f"bound → expected: expected at {f.decode_bandwidth:.0%} of peak bandwidth in decode, "
            f"{f.prefill_compute:.0%} of peak FLOP/s in prefill,\n  {f.decode_compute:.0%} in compute-bound decode"
            f"{overhead} ({e.efficiency_source}; --bw-efficiency, --prefill-efficiency, "
            "--decode-compute-efficiency, --calibrate)")


def _header(console: Console, d: Deployment) -> None:
    console.print(f"  model     {d.model.shape()}")
    console.print(f"  hardware  {d.hardware.describe(source=False)}")
    note = f" ({d.hardware.note})" if d.hardware.note else ""
    console.print(f"  sources   model: {d.model.source}; hardware: {d.hardware.source}{note}")
    for peak in d.hardware.peaks:
        used = f" ← used ({normalize_dtype(d.weight_dtype)} weights multiply in {peak.dtype})" \
            if d.compute_peak == peak else ""
        console.print(f"  peak      {peak.label()}{used}: {peak.detail}")


def _memory_share(e: Estimate) -> str:
    """How much memory the cache was given: ``0.90 of memory``, or with --kv-free-fraction its share of what the
    weights leave and the whole-memory share that comes to."""
    if e.kv_free_fraction is None:
        return f"{e.gpu_memory_utilization:.2f} of memory"
    return f"{e.kv_free_fraction:.2f} of the memory the weights leave: {e.gpu_memory_utilization:.3f} of all of it"


def _lengths_line(console: Console, r: RequestLengths) -> None:
    """The ``--lengths`` file's requests: their means and what a decoding sequence holds on average."""
    alike = r.input_mean + r.output_mean / 2
    held = (f"{r.decode_context:,.0f} tokens on average over the steps, not the means' {alike:,.0f} (a long answer "
            "stays in the batch for more steps)" if abs(r.decode_context - alike) >= 0.005 * alike else
            f"{r.decode_context:,.0f} tokens on average over the steps, as the means give (their lengths alike)")
    whole = r.input_mean + r.output_mean
    reserved = (f"; a slot holds {r.room:,.0f} tokens reserved on average, not the means' {whole:,.0f}"
                if abs(r.room - whole) >= 0.005 * whole else "")
    console.print(f"  lengths   {r.requests:,} request{'s' if r.requests != 1 else ''} ({clipped(r.source)}): "
                  f"means {r.input_mean:,.1f} → {r.output_mean:,.1f} tokens; a decoding sequence holds {held}"
                  f"{reserved}")


def render_estimate(console: Console, e: Estimate) -> None:
    d = e.deployment
    console.print(d.describe(), style="bold")
    _header(console, d)
    per_gpu = f", {fmt_bytes(d.weight_bytes_per_gpu)} per GPU" if d.gpus > 1 else ""
    console.print(f"  weights   {fmt_bytes(d.weight_bytes)} ({d.weight_bytes / GIB:,.2f} GiB) in "
                  f"{d.weight_format}{per_gpu}")
    peak, fmt = d.compute_peak, weight_dtype(d.weight_dtype)
    if peak is not None and d.dequantised_to:
        why = (f"{d.hardware.name}'s fp4 units take {' and '.join(d.hardware.fp4_formats)}, not {fmt.name}"
               if fmt.compute == "fp4" and d.hardware.fp4_tflops else f"{d.hardware.name} lists no {fmt.compute} peak")
        console.print(f"  compute   {why}: the {fmt.name} weights are dequantised and multiply at {peak.label()}")
    spec = d.model
    state = spec.recurrent_bytes_per_sequence
    bounded = d.kv_bytes_per_sequence(spec.sliding_window) - spec.sliding_window * d.kv_bytes_per_token - state
    kv = f"  KV cache  {fmt_bytes(d.kv_bytes_per_token)} per token ({d.kv_dtype})"
    if spec.window_layers:
        kv += (f" + at most {fmt_bytes(bounded)} a sequence in its {spec.window_layers} "
               f"{spec.sliding_window:,}-token window layers")
    if spec.recurrent_layers:
        kv += f" + {fmt_bytes(state)} of state a sequence in its {spec.recurrent_layers} recurrent layers"
    if e.kv_capacity_tokens is not None and (spec.window_layers or spec.recurrent_layers):
        kv += f"; {e.max_sequences:,} sequences of {e.tokens_per_sequence:,} fit ({_memory_share(e)})"
    elif e.kv_capacity_tokens is not None:
        kv += (f"; {e.kv_capacity_tokens:,} tokens fit ({_memory_share(e)}): "
               f"{e.max_sequences:,} sequences of {e.tokens_per_sequence:,}")
    console.print(kv)
    _warnings(console, e)
    ceiling = weight_bytes_read(d, 1) / d.tp / d.hardware.bandwidth
    console.print(f"  ceiling   one request, empty cache: {fmt_bytes(weight_bytes_read(d, 1) / d.tp)} read per token / "
                  f"{d.hardware.bandwidth_gbs:,.4g} GB/s = {ceiling * 1e3:,.3g} ms → {1 / ceiling:,.1f} tok/s at most")
    short, turn = e.compute_bound_batch_short, e.compute_bound_batch
    if short is not None:
        mid = e.lengths.decode_context if e.lengths else e.input_tokens + e.output_tokens / 2
        at_ctx = f"batch {turn:,}" if turn is not None else "never (KV reads dominate)"
        console.print(f"  turning   decode compute bound from batch {short:,} at short contexts; at {mid:,.0f} "
                      f"cached tokens per sequence: {at_ctx}")
    _batch_table(console, e)
    if e.max_load is not None:
        m = e.max_load
        console.print(f"  max load  {m.batch:,} sequences at once (set by the {m.limited_by}), each finished one "
                      f"replaced at once: {_tok(m.output_tok_s)} output tok/s in all, {_tok(m.per_request_tok_s)} "
                      f"per request; an iteration is {_ms(m.decode_s)} ms of decode + {_ms(m.prefill_s)} ms of "
                      f"the new prompts' prefill ({m.bound} bound; expected)")
    console.print(f"  {_efficiency_line(e)}")
    console.print(f"  {_communication_line(e)}")
    for line in _track_record_lines(e):
        console.print(f"  {line}")
    if not d.compute_flops:
        console.print(f"  {d.hardware.name} has no compute figure: prefill, the batch rows and the maximum load count "
                      "only the memory reads, no FLOPs: upper bounds, most optimistic at large batches (give the "
                      "peak in a --hardware-file row)")


def _warnings(console: Console, e: Estimate) -> None:
    """What the figures below assume that a server would not do: a request past the model's context, weights
    that do not fit; and the requests' spread lengths where a file gave them."""
    d, spec = e.deployment, e.deployment.model
    if e.past_context is not None:
        console.print(Text.assemble("  ", ("context", "bold"), f"   {e.past_context:,} tokens a request (input + "
                                    f"output) pass {spec.name}'s context of {spec.max_context:,}: a server refuses "
                                    "such requests (vLLM's --max-model-len defaults to it) unless a RoPE scaling "
                                    "extends it. The figures below assume it took them."))
    if e.lengths is not None:
        _lengths_line(console, e.lengths)
    if e.kv_capacity_tokens == 0 and d.hardware.memory_gb:
        console.print(Text.assemble("  ", ("does not fit", "bold"),
                                    f": {d.weight_bytes_per_gpu / GIB:,.2f} GiB of weights per GPU + 2 GiB reserve > "
                                    f"{d.hardware.memory_gb * e.gpu_memory_utilization:,.2f} GiB usable; use more "
                                    "GPUs (--tp, --pp) or a lower-bit --dtype. The times below assume it did fit."))


def _batch_table(console: Console, e: Estimate) -> None:
    """The batch rows: the closed loop (what ``bench -c B`` sees) and, beside it, decode only."""
    table = Table(show_edge=False, title=None)
    for column in ("batch", "fits", "KV at end", "TTFT ms", "ITL ms", "tok/s per request", "tok/s in all",
                   "decode-only step ms", "decode-only tok/s", "bound by"):
        table.add_column(column, justify="left" if column in ("fits", "bound by") else "right")
    for row in e.rows:
        fits = "?" if row.fits is None else "yes" if row.fits else "NO"
        b, x = row.closed_bound, row.closed_expected
        table.add_row(f"{row.batch:,}", fits, fmt_bytes(row.kv_bytes_end), _pair(_ms(b.ttft_s), _ms(x.ttft_s)),
                      _pair(_ms(b.itl_s), _ms(x.itl_s)),
                      _pair(_tok(row.per_request_bound_tok_s), _tok(row.per_request_expected_tok_s)),
                      _pair(_tok(row.aggregate_bound_tok_s), _tok(row.aggregate_expected_tok_s)),
                      _pair(_ms(row.step_bound_s), _ms(row.step_expected_s)),
                      _pair(_tok(row.decode_only_bound_tok_s), _tok(row.decode_only_expected_tok_s)),
                      row.limiter + (" (saturated)" if x.saturated else ""))
    console.print(table)
    how = (f"chunked prefill, at most {e.step_tokens:,} tokens a step" if e.chunked_prefill
           else "prefill in steps of its own that stall decoding")
    console.print(f"  closed loop: B users, each sending the next {e.input_tokens:,}-token prompt as its "
                  f"{e.output_tokens:,}-token answer ends ({how}): what a benchmark at concurrency B measures; "
                  "tok/s per request = 1 / ITL, in all = B × output / (TTFT + (output − 1) × ITL). Decode only: "
                  "the batch running with no prompt arriving (an upper bound).")
    if e.max_sequences is not None and any(row.fits is False for row in e.rows):
        console.print(f"  fits NO: the KV cache holds {e.max_sequences:,} such sequences; the closed loop runs that "
                      "many at a time and the other users wait for a slot (their TTFT holds the wait).")
    capped = [row.batch for row in e.rows if row.batch > e.engine_holds and row.fits is not False]
    if capped:
        console.print(f"  batch {', '.join(f'{b:,}' for b in capped)} above the engine's batch limit "
                      f"({e.engine_holds:,} sequences at once, --max-batch): it runs that many and the other users "
                      "wait for a slot (their TTFT holds the wait).")
    saturated = [row.batch for row in e.rows if row.closed_expected.saturated]
    if saturated:
        console.print(f"  saturated at batch {', '.join(f'{b:,}' for b in saturated)}: the arriving prompts need "
                      "more tokens a step than the budget leaves, so fewer sequences decode and the rest wait "
                      "(TTFT grows); --step-tokens sets the budget")


def _communication_line(e: Estimate) -> str:
    """How the step times count the GPUs' communication (`tokometer.perf.collective`)."""
    from tokometer.perf.collective import COLLECTIVE_LATENCY_S, PCIE_BUS_SHARE, communication, scale_up

    d = e.deployment
    if d.tp <= 1:
        return "communication: none (one GPU per stage)"
    if not communication(d, 1).counted:
        return (f"communication: NOT counted: {d.hardware.name} has no link figure (link_gbs in a hardware file); "
                "the times are optimistic by the all-reduces")
    kind = communication(d, 1).kind
    kind = {"all-reduce": "2 all-reduces a layer" + (" (whole experts on each GPU: the same)" if d.expert_parallel
                                                      else ""),
            "all-gather + reduce-scatter": f"{kind} a layer (attention data parallel)"}.get(kind, kind)
    link = d.hardware.link_gbs or 0
    if scale_up(link):
        return (f"communication counted in every step: {kind} of the step's bf16 activations over a {link:,.6g} GB/s "
                "link, each at the faster of a custom all-reduce and NCCL's as measured on H100 NVLink for its "
                "size (--explain)")
    return (f"communication counted in every step: {kind} of the step's bf16 activations over {link:,.6g} / 2 GB/s "
            f"(one direction of a PCIe link) at {PCIE_BUS_SHARE:.0%} of it, {COLLECTIVE_LATENCY_S * 1e6:,.3g} µs each, "
            "as NCCL measured over PCIe (--explain)")


def _track_record_lines(e: Estimate) -> list[str]:
    """How far the estimate has been from published figures of such cases (`tokometer.perf.trackrecord`)."""
    t = e.track_record
    if t is None:
        return []
    k, c = t.kind, t.fixed_concurrency
    lines = [f"checked   against published figures (reference/published-figures in the docs), held out from fitting: "
             f"{k.scope} at maximum load {k.within} of {k.figures} within ±15 % (median |error| "
             f"{100 * k.median_abs_error:.0f} %), {c.scope} (the batch rows) {c.within} of {c.figures} "
             f"({100 * c.median_abs_error:.0f} %){_few_users(e)}"]
    mine = t.deployment
    if mine is not None:
        by = _median_lean(mine.median_error)
        split = {"fit": "of the fit split, chosen on them", "held-out": "held out"}.get(mine.split, mine.split)
        line = (f"          this deployment ({mine.scope}): {mine.figures} figures ({split}), {mine.within} "
                f"within ±15 %, the estimate {by}")
        lines.append(line + (f"; a known miss: {mine.reason}" if mine.reason else ""))
    return lines


def _few_users(e: Estimate) -> str:
    """``; at 1-5 users 15 of 23, the estimate a median 11 % slower``, where a batch row has that few users."""
    t = e.track_record
    if t is None or not any(row.batch <= FEW_USERS for row in e.rows):
        return ""
    f = t.few_users
    return f"; at 1-{FEW_USERS} users {f.within} of {f.figures}, the estimate {_median_lean(f.median_error)}"


def _median_lean(off: float) -> str:
    """``a median 9 % slower`` (than the published figures), ``a median 4 % faster``, or none at the median."""
    if not round(100 * off):
        return "within 0.5 % at the median"
    return f"a median {100 * abs(off):.0f} % {'faster' if off > 0 else 'slower'}"


def render_target(console: Console, a: TargetAnswer) -> None:
    console.print(Text.assemble((f"What would it take to see {a.target:,.0f} tok/s with {a.model.name}?", "bold"),
                                f" ({a.input_tokens:,} tokens in, {a.output_tokens:,} out)"))
    if a.lengths is not None:
        _lengths_line(console, a.lengths)
    console.print(f"  For scale: at {a.target:,.0f} tok/s, 1,000 tokens take {1000 / a.target:.3f} s.")
    needed = ", ".join(f"{fmt} {gbs / 1000:,.1f} TB/s" for fmt, gbs in a.per_request_bandwidth_gbs.items())
    console.print(f"  Per request: one decode step every {1e3 / a.target:.3f} ms needs memory bandwidth of {needed} "
                  f"(at {a.efficiency.decode_bandwidth:.0%} efficiency), over the whole TP group.")
    for line in a.per_request_lines() + a.context_lines() + a.aggregate_lines():
        console.print(f"  {line}")
    table = Table(show_edge=False, title="In aggregate (expected): fewest GPUs, then smallest batch")
    for column in ("hardware", "weights", "GPUs", "batch", "tok/s in all", "tok/s per request", "1 request alone",
                   "fit"):
        table.add_column(column, justify="left" if column in ("hardware", "weights") else "right")
    reached = [o for o in a.options if o.reached]
    for o in reached[:15]:
        d = o.deployment
        table.add_row(d.hardware.name, _weights(d), str(d.gpus), f"{o.batch:,}",
                      _tok(o.aggregate_tok_s), _tok(o.per_request_tok_s), _tok(o.batch1_tok_s),
                      f"{o.max_sequences:,}")
    if reached:
        console.print(table)
        if len(reached) > 15:
            console.print(f"  … and {len(reached) - 15} more (--json has them all)")
    if any(o.deployment.dequantised_to for o in a.options):
        console.print("  (as bf16): weights stored in that format and dequantised to multiply at that type's peak, "
                      "where the hardware takes no such format (an engine's weight-only kernels, or its emulation)")
    missed = [o for o in a.options if not o.reached]
    if missed:
        names = "; ".join(f"{o.deployment.hardware.name} {_weights(o.deployment)} "
                          f"(≤ {_tok(o.aggregate_tok_s)} with {o.deployment.gpus})" for o in missed[:8])
        console.print("  Not reachable with up to 8 devices (the aggregate levels off, or memory runs out, first): "
                      + names + (" …" if len(missed) > 8 else ""))


def _weights(d: Deployment) -> str:
    """A target row's weight format, with what it multiplies in where dequantised (``nvfp4 (as bf16)``)."""
    name = normalize_dtype(d.weight_dtype)
    return f"{name} (as {d.dequantised_to})" if d.dequantised_to else name


def render_run(console: Console, r: RunEfficiency) -> None:
    d = r.deployment
    console.print(f"Run {r.run_id}: efficiency of {d.describe()}", style="bold")
    _header(console, d)
    console.print(f"  weights   {fmt_bytes(d.weight_bytes)} read per decode step; KV {fmt_bytes(d.kv_bytes_per_token)} "
                  "per cached token")
    table = Table(show_edge=False)
    for column in ("step", "load", "n", "batch", "TPOT ms", "decode GB/s (MBU)", "decode MFU", "prefill ms (MFU)",
                   "TTFT ms", "wait ms", "bottleneck"):
        table.add_column(column, justify="left" if column in ("load", "bottleneck") else "right")

    def ms(x: float | None) -> str:
        return "-" if x is None else _ms(x)

    for s in r.steps:
        def pct(x: float | None, name: str, s: StepEfficiency = s) -> str:
            if name in s.over_peak:
                return "above peak!"  # not an efficiency: the message below says why
            return "-" if x is None else f"{x:.1%}" if x < 0.1 else f"{x:.0%}"

        gbs = f"{s.bytes_per_step / s.tpot_s / 1e9:,.1f} ({pct(s.mbu, 'mbu')})" if s.tpot_s else "-"
        table.add_row(str(s.step), s.load, str(s.requests), f"{s.decode_batch:.2f}", ms(s.tpot_s), gbs,
                      pct(s.decode_mfu, "decode_mfu"), f"{ms(s.prefill_s)} ({pct(s.prefill_mfu, 'prefill_mfu')})",
                      ms(s.ttft_s), ms(s.wait_s), s.bottleneck)
    console.print(table)
    for s in r.steps:
        console.print(f"  step {s.step} ({s.load}): {s.bottleneck}: {s.why}")
        for over in s.over_peak.values():
            console.print(Text.assemble(f"  step {s.step} ({s.load}): ", (over.message, "bold")))
    sources = sorted({s.prefill_source for s in r.steps})
    console.print(f"  batch = mean requests decoding at once; prefill time from: {', '.join(sources)}")
    console.print("  MBU = (weights + KV read per step) / TPOT / peak bandwidth; MFU = FLOPs / time / peak FLOP/s")
    console.print(f"  bottleneck rule ({r.rule})")
    _loops_table(console, r)


def _loop_pair(c: LoopBeside, what: str) -> str:
    """``bound → expected`` of one closed-loop figure (``ttft``, ``itl`` or ``tok``), or ``-`` without a B."""
    if c.bound is None or c.expected is None:
        return "-"

    def one(z: ClosedLoop) -> str:
        return _ms(z.ttft_s) if what == "ttft" else _ms(z.itl_s) if what == "itl" else _tok(z.aggregate_tok_s)

    return _pair(one(c.bound), one(c.expected))


def _ratio(c: LoopBeside) -> str:
    """Measured / expected tok/s as a multiple; past the bound itself it says the peak used is wrong."""
    ratio = c.ratio()
    if ratio is None:
        return "-"
    beyond = c.bound is not None and c.measured_tok_s is not None and c.measured_tok_s > c.bound.aggregate_tok_s
    return f"{ratio:,.2f}×" + (" (above the bound: the hardware figures are too low)" if beyond else "")


SPREAD_SHOWN = 0.05
"""A step's cached tokens are said when its lengths' spread moves them this far from the means' I + O / 2."""


def _loops_table(console: Console, r: RunEfficiency) -> None:
    """Each step measured beside the closed-loop estimate of its concurrency and lengths (`perf.measuredloop`)."""
    if not r.closed_loop:
        return
    table = Table(show_edge=False, title="measured beside the estimate for the same concurrency and lengths")
    for column in ("step", "load", "in → out", "TTFT ms measured", "estimated", "ITL ms measured", "estimated",
                   "tok/s measured", "estimated", "measured / expected"):
        table.add_column(column, justify="left" if column == "load" else "right")

    def ms(x: float | None) -> str:
        return "-" if x is None else _ms(x)

    for c in r.closed_loop:
        table.add_row(str(c.step), c.load, f"{c.input_tokens:,} → {c.output_tokens:,}", ms(c.measured_ttft_s),
                      _loop_pair(c, "ttft"), ms(c.measured_itl_s), _loop_pair(c, "itl"),
                      "-" if c.measured_tok_s is None else _tok(c.measured_tok_s), _loop_pair(c, "tok"),
                      _ratio(c))
    console.print(table)
    console.print("  estimated: bound → expected, the closed loop of B users at the step's mean lengths (estimate "
                  "--batch B --input-tokens I --output-tokens O), each step's cached tokens from the step's own "
                  "lengths (long answers weigh as long as they decode); means of TTFT and of each request's ITL; a "
                  "rate or trace step has no fixed B ('-')")
    _spread_lines(console, r)


def _spread_lines(console: Console, r: RunEfficiency) -> None:
    """A line for each closed-loop step whose lengths' spread moved its cached tokens past `SPREAD_SHOWN`."""
    for c in r.closed_loop:
        alike = c.input_tokens + c.output_tokens / 2
        if c.concurrency is not None and abs(c.decode_context / alike - 1) >= SPREAD_SHOWN:
            console.print(f"  step {c.step}: its requests' lengths spread: a decoding sequence held "
                          f"{c.decode_context:,.0f} tokens on average, not the means' {alike:,.0f}")


def render_models(console: Console, models: list[ModelSpec]) -> None:
    table = Table(show_edge=False)
    for column in ("name", "Hub id", "params", "active", "layers", "hidden", "heads", "KV heads", "head dim",
                   "vocab", "context"):
        table.add_column(column, justify="left" if column in ("name", "Hub id") else "right")
    for m in models:
        table.add_row(m.name, m.hf_id, f"{m.params / 1e9:,.2f} B", f"{m.active / 1e9:,.2f} B", str(m.layers),
                      str(m.hidden), str(m.heads), "MLA" if m.is_mla else str(m.kv_heads), str(m.head_dim),
                      f"{m.vocab:,}", f"{m.max_context:,}")
    console.print(table)


def render_hardware(console: Console, rows: list[HardwareSpec]) -> None:
    table = Table(show_edge=False)
    for column in ("name", "kind", "memory GiB", "GB/s", "bf16 TFLOP/s", "fp8 TFLOP/s", "int8 TOP/s", "fp4 TFLOP/s",
                   "link GB/s", "source"):
        table.add_column(column, justify="left" if column in ("name", "kind", "source") else "right")

    def num(x: float | None) -> str:
        return "-" if x is None else f"{x:,.6g}"

    for h in rows:
        table.add_row(h.name, h.kind, num(h.memory_gb), num(h.bandwidth_gbs), num(h.bf16_tflops),
                      num(h.fp8_tflops), num(h.int8_tops),
                      num(h.fp4_tflops) + h.fp4_label[3:] if h.fp4_tflops else "-", num(h.link_gbs),
                      h.source + (f" ({h.note})" if h.note else ""))
    console.print(table)
    console.print("  dense (not sparse) peaks per device; a format without its column is dequantised to bf16 (fp4: "
                  "nvfp4 and mxfp4 unless the formats it takes are named); link: GB/s per device, both directions "
                  "summed (NVLink, Infinity Fabric, ICI; else PCIe)")
