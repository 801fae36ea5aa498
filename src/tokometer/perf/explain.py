"""`explain()`: an `Estimate`'s arithmetic written out in words, number by number (``--explain``)."""

from __future__ import annotations

from tokometer.perf.collective import (
    ACTIVATION_BYTES,
    COLLECTIVE_LATENCY_S,
    COLLECTIVE_LATENCY_SOURCE,
    CUSTOM_SOURCE,
    NCCL_SOURCE,
    PCIE_BUS_SHARE,
    Communication,
    communication,
    communication_s,
    scale_up,
)
from tokometer.perf.estimate import BatchEstimate, Estimate
from tokometer.perf.groupedgemm import EXPERT_TILE_ROWS
from tokometer.perf.model import INDEXER_KEY_BYTES
from tokometer.perf.quant import normalize_dtype, weight_dtype
from tokometer.perf.roofline import (
    ACTIVATION_RESERVE_GIB,
    Deployment,
    Efficiency,
    decode_step_s,
    expert_extra_flops,
    matmul_bytes,
    pipeline_microbatch,
    pipeline_share,
    prefill_flops,
    prefill_s,
    weight_bytes_read,
)
from tokometer.util.units import GIB

__all__ = ["explain", "fmt_bytes", "fmt_time", "kv_arithmetic", "weights_arithmetic"]



def fmt_bytes(n: float) -> str:
    """Bytes as GB (10^9) above 1 GB, else MB, else KiB."""
    if n >= 1e9:
        return f"{n / 1e9:,.2f} GB"
    if n >= 1e6:
        return f"{n / 1e6:,.1f} MB"
    return f"{n / 1024:,.1f} KiB"


def fmt_time(seconds: float) -> str:
    return f"{seconds * 1e3:,.3f} ms" if seconds < 1 else f"{seconds:,.2f} s"


def weights_arithmetic(d: Deployment) -> str:
    """How ``d``'s weight bytes are worked out, in words, down to GiB and (several GPUs) per GPU."""
    m, fmt = d.model, weight_dtype(d.weight_dtype)
    total = d.weight_bytes
    if m.weight_bytes and normalize_dtype(d.weight_dtype) == normalize_dtype(m.native_dtype):
        how = f"{fmt_bytes(total)} ({fmt.name} tensors as stored: {total * 8 / m.params:.2f} bits per weight)"
    elif d.expert_weight_bytes and m.expert_format(d.weight_dtype) != fmt.name:
        experts = weight_dtype(m.expert_format(d.weight_dtype))
        how = (f"{m.expert_params / 1e9:.2f} B routed-expert params × {m.expert_bits_for(d.weight_dtype):.4g} bits "
               f"/ 8 ({experts.name}) "
               f"+ the other {(m.params - m.expert_params) / 1e9:.2f} B in {fmt.name} = {fmt_bytes(total)}")
    elif fmt.linear_only:
        native = m.is_native(d.weight_dtype)
        kept = m.kept_params + m.kept_expert_params if native else 0.0
        emb = min(m.embedding_params + kept, m.params)
        what = "embedding/LM-head params and those the checkpoint keeps" if kept else "embedding/LM-head params"
        bits, source = m.bits_for(d.weight_dtype), fmt.source
        if bits != fmt.bits:
            source = "4-bit weights and the scales and zero points of the groups its config declares"
        how = (f"({m.params / 1e9:.2f} B − {emb / 1e9:.2f} B {what}) × {bits:.4g} bits / 8 "
               f"+ {emb / 1e9:.2f} B × 2 B = {fmt_bytes(total)} ({source})")
    else:
        how = f"{m.params / 1e9:.2f} B params × {fmt.bytes_per_weight:g} B ({fmt.name}) = {fmt_bytes(total)}"
    per_gpu = (f"; / {d.gpus} GPUs = {fmt_bytes(d.weight_bytes_per_gpu)} = {d.weight_bytes_per_gpu / GIB:,.2f} GiB "
               "per GPU" if d.gpus > 1 else "")
    return f"{how} = {total / GIB:,.2f} GiB{per_gpu}"


def kv_arithmetic(d: Deployment) -> str:
    """How many KV-cache bytes one token adds, in words: whole model and (several GPUs) per GPU."""
    m, b = d.model, d.kv_element_bytes
    others = [f"{m.window_layers} keep at most a {m.sliding_window:,}-token window"] if m.window_layers else []
    if m.recurrent_layers:
        others.append(f"{m.recurrent_layers} keep a fixed {fmt_bytes(m.recurrent_state_bytes)} state a sequence "
                      "instead (linear attention / state space)")
    window = f" (full-attention; of the others {' and '.join(others)})" if others else ""
    if m.is_mla:
        text = (f"{m.kv_layers} layers × ({m.kv_lora_rank} latent + {m.qk_rope_head_dim} RoPE) × {b:g} B "
                f"(multi-head latent attention)")
        if m.indexer_layer_count:
            text += (f" + {m.indexer_layer_count} layers × ({m.indexer_head_dim} + {INDEXER_KEY_BYTES}) B "
                     "(the sparse attention's indexer keys, fp8)")
    else:
        text = f"2 (K and V) × {m.kv_layers} layers{window} × {m.kv_heads} KV heads × {m.head_dim} head dim × {b:g} B"
    split = "the latent cache whole on every TP rank" if m.is_mla else f"KV heads over TP {d.tp}"
    per_gpu = (f"; per GPU {fmt_bytes(d.kv_bytes_per_token_per_gpu)} (layers split over PP {d.pp}, {split})"
               if d.gpus > 1 else "")
    return f"{text} = {d.kv_bytes_per_token:,.0f} B = {fmt_bytes(d.kv_bytes_per_token)}{per_gpu}"


def _capacity(e: Estimate) -> str:
    d = e.deployment
    if e.kv_capacity_tokens is None:
        return f"KV capacity: unknown ({d.hardware.name} has no memory size in the table)."
    memory = d.hardware.memory_gb or 0
    usable = memory * e.gpu_memory_utilization
    left = usable - d.weight_bytes_per_gpu / GIB - ACTIVATION_RESERVE_GIB
    if e.kv_free_fraction is not None:
        return (f"KV capacity: ({memory:,.4g} GiB − {d.weight_bytes_per_gpu / GIB:,.2f} GiB weights − "
                f"{ACTIVATION_RESERVE_GIB:.2f} GiB reserve for activations) × {e.kv_free_fraction:.2f} (the share of "
                f"free memory given, TensorRT-LLM's kv_cache_free_gpu_mem_fraction) = {max(left, 0):,.2f} GiB per "
                f"GPU{_per_sequence(e)}, so {e.max_sequences:,} sequences fit at once.")
    return (f"KV capacity: {memory:,.4g} GiB × {e.gpu_memory_utilization:.2f} − {d.weight_bytes_per_gpu / GIB:,.2f} "
            f"GiB weights − {ACTIVATION_RESERVE_GIB:.2f} GiB reserve for activations = {max(left, 0):,.2f} GiB per "
            f"GPU{_per_sequence(e)}, so {e.max_sequences:,} sequences fit at once.")


def _per_sequence(e: Estimate) -> str:
    """What one request's cache takes, in words: tokens × KV per token, or, with window layers, its bytes."""
    d, m, n = e.deployment, e.deployment.model, e.tokens_per_sequence
    holds = (f"A slot holds {n:,} tokens reserved on average over the steps (the {e.lengths.requests:,} requests' "
             f"E[O·I] / E[O] + E[O²] / E[O]; the means' {e.input_tokens:,} + {e.output_tokens:,} if they were alike)"
             if e.lengths else f"A request holds up to {e.input_tokens:,} + {e.output_tokens:,} = {n:,} tokens")
    if not m.window_layers and not m.recurrent_layers:
        return f"; / {fmt_bytes(d.kv_bytes_per_token_per_gpu)} = {e.kv_capacity_tokens:,} tokens. {holds}"
    kinds = []
    if m.window_layers:
        kinds.append(f"its {m.window_layers} window layers keep at most {m.sliding_window:,} of them")
    if m.recurrent_layers:
        kinds.append(f"its {m.recurrent_layers} recurrent layers a fixed {fmt_bytes(m.recurrent_bytes_per_sequence)} "
                     "of state")
    return f". {holds}: {fmt_bytes(d.kv_bytes_per_sequence_per_gpu(n))} per GPU ({'; '.join(kinds)})"


def _held(e: Estimate) -> str:
    """What a decoding sequence holds cached on average: mid-answer I + O / 2, or the lengths file's spread's."""
    if e.lengths is None:
        return f"mid-answer each holds {e.input_tokens:,} + {e.output_tokens:,}/2 tokens"
    return (f"each holds {e.lengths.decode_context:,.0f} tokens on average over the steps, the {e.lengths.requests:,} "
            "requests' E[O·I] / E[O] + E[O²] / (2 E[O]) (a long answer stays in the batch for more steps; the means' "
            f"{e.input_tokens:,} + {e.output_tokens:,}/2 if they were alike)")


def _decode(e: Estimate, whole: int, whole_context: int) -> str:
    d, eff = e.deployment, e.efficiency
    batch = pipeline_microbatch(d, whole)  # pipeline parallel: the arithmetic is one microbatch's whole-model step
    context = round(whole_context * pipeline_share(d, whole))
    bound, expected = decode_step_s(d, whole, whole_context), decode_step_s(d, whole, whole_context, eff)
    pipelined = (f" (pipeline parallel {d.pp}: {d.pp} microbatches of {batch:,} in flight, one on each stage, so each "
                 f"token's step is the whole model's at batch {batch:,}, and {d.pp} of them advance at once)"
                 if batch != whole else "")
    w = weight_bytes_read(d, batch)
    act = matmul_bytes(d, batch) - w / d.tp
    kv = d.kv_read_bytes(batch, context)
    bw = d.hardware.bandwidth_gbs
    tp = f" / TP {d.tp}" if d.tp > 1 else ""
    moe = (f" (the shared weights plus the {d.model.expert_fraction_read(batch):.0%} of the routed experts that "
           f"a step of {batch:,} tokens reaches: {d.model.expected_experts(batch):,.1f} of {d.model.experts} per "
           "layer, routing taken as uniform)" if d.model.is_moe else "")
    lines = [f"Decode, batch {whole:,}{pipelined}: a step reads the weights once, {fmt_bytes(w)}{moe}{tp}; its matmuls "
             f"read and write {batch:,} × {d.model.activation_elements_per_token:,.0f} activations × "
             f"{ACTIVATION_BYTES} B{tp} = {fmt_bytes(act)}; and it reads every sequence's KV cache: {_held(e)}, "
             f"{context:,} in all"
             f"{_window_read(d, batch, context) or ' × ' + fmt_bytes(d.kv_read_bytes_per_token)}"
             f"{_state_read(d, batch)} = {fmt_bytes(kv)}. "
             f"({fmt_bytes(w / d.tp)} + {fmt_bytes(act)} + "
             f"{fmt_bytes(kv)}) / {bw:,.4g} GB/s = {fmt_time((w / d.tp + act + kv) / d.hardware.bandwidth)}."]
    lines += _decode_compute(d, eff, batch, context)
    comm = communication_s(d, batch)
    talk = f" (plus {fmt_time(comm)} of communication below)" if comm else ""
    fixed = (f", + {d.model.layers} layers × {eff.layer_overhead_s * 1e6:,.0f} µs a step" if eff.layer_overhead_s
             else "")
    lines.append(f"  Step bound{talk} {fmt_time(bound)} → {1 / bound:,.1f} tok/s per request, "
                 f"{whole / bound:,.1f} tok/s in all; expected at {eff.decode_bandwidth:.0%} of bandwidth / "
                 f"{eff.decode_compute:.0%} of FLOP/s{fixed}: "
                 f"{fmt_time(expected)} → {1 / expected:,.1f} and {whole / expected:,.1f} tok/s.")
    return "\n".join(lines)


def _window_read(d: Deployment, batch: int, context: int) -> str:
    """`` (its 52 window layers at most 1,024 tokens a sequence)`` where a model's window layers attend to fewer
    tokens than its full ones at this context (`ModelSpec.attended_tokens`), else ``""``."""
    m = d.model
    if m.sparse_topk and context > batch * m.sparse_topk:
        return (f" (sparse: at most {m.sparse_topk:,} tokens a sequence and layer, and the indexer's "
                f"{m.indexer_key_bytes} B keys of every token in {m.indexer_layer_count} layers)")
    if not m.window_layers or context <= batch * m.sliding_window:
        return ""
    return f" (its {m.window_layers} window layers at most {m.sliding_window:,} tokens a sequence)"


def _state_read(d: Deployment, batch: int) -> str:
    """What a step's recurrent layers read and write, in words (``""`` for a model without them)."""
    m = d.model
    if not m.recurrent_layers:
        return ""
    return (f", and the recurrent state of each of its {batch:,} sequences, read and written back "
            f"(2 × {m.recurrent_layers} layers × {fmt_bytes(m.recurrent_state_bytes / d.tp)})")


def _recurrence(d: Deployment, batch: int) -> str:
    """The FLOPs of a decode step's recurrent layers, in words (``""`` for a model without them)."""
    m = d.model
    if not m.recurrent_layers:
        return ""
    return f" + {m.recurrent_layers} recurrent layers × {m.recurrent_flops_per_token:,} FLOPs × {batch:,} sequences"


def _decode_compute(d: Deployment, eff: Efficiency, batch: int, context: int) -> list[str]:
    """The compute side of a decode step in words: the matmuls at the weights' peak, the attention at its own."""
    flops = d.compute_flops
    if not flops:
        return []
    matmuls = 2 * d.model.matmul_params * batch
    attention = d.model.attention_flops(batch, context)
    attention_peak = d.attention_flops or flops
    lines = [f"  Compute: matmuls 2 × {d.model.matmul_params / 1e9:.2f} B params multiplied per token × {batch:,} = "
             f"{matmuls / 1e9:,.1f} GFLOP / ({d.tp} × {flops / 1e12:,.4g} TFLOP/s{_basis(d)}) = "
             f"{fmt_time(matmuls / (d.tp * flops))}; attention {d.model.decode_attention_flops_per_pair:,} FLOPs"
             f"{' (latent attention, absorbed)' if d.model.is_mla else ''} × {context:,} cached tokens"
             f"{_window_read(d, batch, context)}{_recurrence(d, batch)} = "
             f"{attention / 1e9:,.1f} GFLOP / "
             f"({d.tp} × {attention_peak / 1e12:,.4g} "
             f"TFLOP/s, {d.attention_compute_dtype}) = {fmt_time(attention / (d.tp * attention_peak))}. The matmuls "
             "and then the attention: each takes the larger of its bytes and its FLOPs, the step their sum."]
    if d.model.is_moe:
        extra, width = expert_extra_flops(d, batch, eff), d.expert_gemm_width
        split = (f"; each split over the {d.tp} GPUs, a GPU runs 1/{d.tp} of its tiles, of the same depth"
                 if d.tp > 1 and not d.expert_parallel else "")
        lines.append(f"  Expected only: the routed experts run as one grouped GEMM whose rows, each expert's tokens, "
                     f"are padded to {EXPERT_TILE_ROWS}-row tiles, at {width:,.0f} / ({width:,.0f} + "
                     f"{eff.expert_half_width:,.0f}) = {eff.expert_share(width):.0%} of the dense matmuls' efficiency "
                     f"(the expert's whole width{split}): "
                     f"{extra / 1e9:+,.1f} GFLOP at the dense efficiency.")
    return lines


def _basis(d: Deployment) -> str:
    """`` bf16 theoretical``: which figure the compute time was divided by, for a host's per-dtype peaks."""
    peak = d.compute_peak
    return f" {peak.dtype} {peak.basis}" if peak and d.hardware.peaks else ""


def _prefill(e: Estimate) -> str:
    d, eff, n = e.deployment, e.efficiency, e.input_tokens
    flops = d.compute_flops
    floor = (matmul_bytes(d, n) + d.kv_read_bytes_per_token * n) / d.hardware.bandwidth
    if not flops:
        return (f"Prefill of {n:,} tokens: no compute figure for {d.hardware.name}, so only the floor of reading the "
                f"weights and writing the cache once: {fmt_time(floor)}.")
    work = prefill_flops(d.model, n)
    body = d.model.matmul_params - d.model.lm_head_params
    bound = prefill_s(d, n)
    which = "compute bound" if bound > floor * (1 + 1e-9) else "the weight read dominates"
    return (f"Prefill of {n:,} tokens ({which}): 2 × {body / 1e9:.2f} B × {n:,} + the LM head once, 2 × "
            f"{d.model.lm_head_params / 1e9:.2f} B, + attention {d.model.attention_flops_per_pair:,} FLOPs × "
            f"{n:,}×{n + 1:,}/2 causal pairs = {work / 1e12:,.2f} TFLOP / "
            f"({d.tp} × {flops / 1e12:,.4g} TFLOP/s{_basis(d)}) = {fmt_time(work / (d.tp * flops))}; floor: reading "
            f"the weights once and the activations {fmt_time(floor)}. "
            f"Bound {fmt_time(bound)}; expected at {eff.prefill_compute:.0%} of "
            f"FLOP/s {fmt_time(prefill_s(d, n, 0, eff))}: the TTFT of a request that does not queue"
            + (f" (each with {fmt_time(communication_s(d, n))} of communication)." if d.tp > 1 else "."))


def _turning_point(e: Estimate) -> str:
    turn, turn_expected, short = e.compute_bound_batch, e.compute_bound_batch_expected, e.compute_bound_batch_short
    if short is None:
        return "Turning point: none (no compute figure for this hardware): decode is taken as bandwidth bound."
    d = e.deployment
    flops = d.compute_flops or 0.0
    text = (f"Turning point: with short contexts decode turns compute bound at batch {short:,}: there the step's "
            f"FLOPs, 2 × {d.model.matmul_params / 1e9:.2f} B × batch / "
            f"({d.tp} × {flops / 1e12:,.4g} TFLOP/s{_basis(d)}), "
            f"take as long as reading {fmt_bytes(weight_bytes_read(d, short) / d.tp)} of weights"
            f"{' per GPU' if d.tp > 1 else ''} at {d.hardware.bandwidth_gbs:,.4g} GB/s; below it a bigger batch "
            "costs almost nothing per step, as the weights are read once for all sequences.")
    mid = e.lengths.decode_context if e.lengths else e.input_tokens + e.output_tokens / 2
    if turn is None:
        text += (f" With {mid:,.0f} tokens cached per sequence it never does: each sequence's KV read "
                 f"({fmt_bytes(d.kv_read_bytes(1, mid))}) takes longer than its FLOPs.")
    else:
        at_eff = f"{turn_expected:,}" if turn_expected is not None else "never"
        text += f" With {mid:,.0f} tokens cached per sequence: batch {turn:,} (at the stated efficiencies: {at_eff})."
        if e.max_sequences is not None and turn > e.max_sequences:
            text += f" Memory runs out first: {e.max_sequences:,} sequences fit."
    return text


def _collective_time(d: Deployment, c: Communication, what: str) -> str:
    """How one collective's time is counted on ``d``'s link, with its time for one token and for 1,024."""
    link = d.hardware.link_gbs or 0
    if not scale_up(link):
        return (f"a ring sends 2 × ({d.tp} − 1) / {d.tp} of that from each GPU over one direction of its link, "
                f"{link:,.6g} / 2 GB/s (a PCIe link) at {PCIE_BUS_SHARE:.1%} of it, plus "
                f"{COLLECTIVE_LATENCY_S * 1e6:,.3g} µs a collective ({COLLECTIVE_LATENCY_SOURCE})")
    big = communication(d, 1024)
    return (f"each {what} takes the faster of a custom all-reduce (to 1 MiB) and NCCL's, as measured on H100 NVLink "
            f"for its message size ({CUSTOM_SOURCE}; {NCCL_SOURCE}), on this {link:,.6g} GB/s link at the message "
            f"the H100 moves in the same time: {c.each_s * 1e6:,.3g} µs each for one token's "
            f"{fmt_bytes(c.message_bytes)}, {big.each_s * 1e6:,.3g} µs for 1,024 tokens' "
            f"{fmt_bytes(big.message_bytes)}")


def _communication(d: Deployment) -> str:
    """The tensor-/expert-parallel communication of a decode step, in words (`tokometer.perf.collective`)."""
    c = communication(d, 1)
    split = f"Tensor parallel {d.tp}: weights, KV heads and the work are split over {d.tp} GPUs"
    if not c.counted:
        return (f"{split}; their communication is NOT counted: {d.hardware.name} has no link figure (give link_gbs "
                "in a hardware file), so every step here is optimistic by its all-reduces.")
    ep = ("; expert parallel (whole experts on each GPU): after the attention's all-reduce every GPU holds every "
          "token, so each runs its own experts on the tokens routed to them and the MLP's all-reduce sums their "
          "outputs: the same two all-reduces, no dispatch (the engines move tokens to their experts only with "
          "data-parallel attention, --attention-dp)" if d.expert_parallel else "")
    if d.attention_dp:
        split = (f"Attention data parallel over {d.tp} GPUs: each runs the attention of 1/{d.tp} of the sequences "
                 f"with every head and a whole copy of the weights outside the routed experts, which are split "
                 f"over them")
        return (f"{split}. Communication, counted in every step: each of the {d.model.layers} layers gathers the "
                f"step's T tokens × {d.model.hidden:,} activations × {ACTIVATION_BYTES} B before its experts and "
                f"reduce-scatters their sums after (each half an all-reduce's bytes, taken as an all-reduce of "
                f"half the message): {_collective_time(d, c, 'collective')}; no attention all-reduce. One token: "
                f"{c.collectives} collectives, {fmt_bytes(c.bytes_per_gpu)} a GPU, {fmt_time(c.seconds)}.")
    return (f"{split}. Communication, counted in every step (decode and prefill): each of the {d.model.layers} "
            f"layers all-reduces the step's T tokens × {d.model.hidden:,} activations × {ACTIVATION_BYTES} B (bf16) "
            f"after attention and after the MLP: {_collective_time(d, c, 'all-reduce')}{ep}. One token: "
            f"{c.collectives} collectives, {fmt_bytes(c.bytes_per_gpu)} a GPU, {fmt_time(c.seconds)}; the "
            "collectives are taken as not overlapped with the kernels (added to the step's roofline).")


def _closed_loop(e: Estimate, row: BatchEstimate) -> str:
    """One batch row's closed loop in words (`tokometer.perf.closedloop`)."""
    c, b = row.closed_expected, row.batch
    head = (f"  Closed loop, {b:,} users (each sends its next prompt as its answer ends): the others send "
            f"({b:,} − 1) / {e.output_tokens:,} = {c.prompts_per_step:,.3g} prompts a decode step. ")
    if b == 1:
        head = "  Closed loop, one user (its next prompt as its answer ends): nothing else arrives. "
    if b == 1 and not c.saturated:
        body = f"ITL is the decode step, {fmt_time(c.itl_s)}. "
    elif c.saturated:
        body = (f"They need more than the {c.step_tokens:,}-token step budget leaves, so every step is full: "
                f"{c.decode_batch:,.1f} sequences decode beside {c.prefill_tokens:,.0f} prompt tokens, "
                f"{fmt_time(c.itl_s)} a step, and the others wait for their prefill. ")
    elif c.chunked:
        body = (f"Chunked prefill (at most {c.step_tokens:,} tokens a step): {c.prefill_share:.0%} of the steps also "
                f"carry {c.prefill_tokens:,.0f} prompt tokens (one weight read for all, their FLOPs added to the "
                f"decode step's roofline): "
                f"{fmt_time(c.prefill_step_s)} against {fmt_time(c.decode_step_s)} decode only; ITL = "
                f"{1 - c.prefill_share:.2f} × {fmt_time(c.decode_step_s)} + {c.prefill_share:.2f} × "
                f"{fmt_time(c.prefill_step_s)} = {fmt_time(c.itl_s)}. ")
    else:
        body = (f"Prefill in steps of its own ({c.prefill_tokens:,.0f} tokens, {fmt_time(c.prefill_step_s)}), "
                f"{c.prefill_share:,.3g} of them a decode step, stalling it: ITL = {fmt_time(c.decode_step_s)} + "
                f"{c.prefill_share:,.3g} × {fmt_time(c.prefill_step_s)} = {fmt_time(c.itl_s)}. ")
    wait = ("what is left of the step in flight, long steps met in proportion to their length, and the prompts "
            "queued ahead, then ") if b > 1 else ""
    tail = (f"TTFT {fmt_time(c.ttft_s)} ({wait}the prompt's own prefill). Per user cycle "
            f"{fmt_time(c.ttft_s)} + {e.output_tokens - 1:,} × {fmt_time(c.itl_s)} = {fmt_time(c.cycle_s)}: "
            f"{c.per_request_tok_s:,.1f} tok/s per request (1 / ITL), {b:,} × {e.output_tokens:,} / "
            f"{fmt_time(c.cycle_s)} = {c.aggregate_tok_s:,.1f} tok/s in all (expected), against "
            f"{row.decode_only_expected_tok_s:,.1f} decode only.")
    return head + body + tail


def explain(e: Estimate) -> str:
    """The estimate's arithmetic in words: memory, KV, capacity, each batch's decode step, prefill, turning point."""
    d = e.deployment
    lines = [f"{d.describe()}", f"Model: {d.model.describe()}.", f"Hardware: {d.hardware.describe()}."
             + (f" {d.hardware.note}." if d.hardware.note else ""), f"Weights: {weights_arithmetic(d)}.",
             f"KV cache per token: {kv_arithmetic(d)}.", _capacity(e), ""]
    for row in e.rows:
        lines += [_decode(e, row.batch, row.context_tokens), _closed_loop(e, row), ""]
    lines.append(_prefill(e))
    lines.append(_turning_point(e))
    if d.tp > 1:
        lines.append(_communication(d))
    if d.pp > 1:
        lines.append(f"Pipeline parallel {d.pp}: memory is split over {d.pp} stages but a token passes them one after "
                     f"another, so per-token latency is not reduced; with {d.pp} or more sequences the engine keeps "
                     f"{d.pp} microbatches in flight, one on each stage, so a batch B steps as the whole model at "
                     f"B / {d.pp} and the aggregate is {d.pp} times that step's (bubbles, unequal stages and the "
                     "hand-off between stages not counted).")
    return "\n".join(lines)
