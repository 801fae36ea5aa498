"""`ModelSpec`: the facts about a transformer that its speed and memory depend on.

Parameters (and, for mixture-of-experts models, the parameters each token uses), layers, hidden
size, attention heads, KV heads (grouped-query attention), head size, vocabulary and context.
Derived quantities, each a one-line formula:

    KV elements per token = 2 (K and V) × KV layers × KV heads × head dim
                            (multi-head latent attention: KV layers × (KV LoRA rank + RoPE dim): the
                            compressed latent and the shared RoPE key, not 2 × heads × head dim)
    KV layers             = layers − window layers: the layers whose cache grows with the context
    attention FLOPs per (query, key) pair = 2 × KV layers × heads × (head dim + V head dim)
                            (a decode step's with multi-head latent attention: 2 × KV layers × heads ×
                            (2 × KV LoRA rank + RoPE dim), its absorbed form: `decode_attention_flops_per_layer_pair`)
    embedding params      = vocab × hidden × (1 if tied else 2)      (input table + LM head)
    matmul params         = active − vocab × hidden if untied, else active: what a token is multiplied
                            with (the input table is a lookup, not a product; the LM head is a product)
    weight bytes          = params × bits / 8; for fp8/int8/4-bit formats only the linear layers
                            are quantised: (params − embedding params) × bits / 8 + embedding params × 2
    expert params (MoE)   = (params − active) × experts / (experts − experts per token): the routed
                            experts; shared experts, the router and dense layers are in the rest
    distinct experts      = E × (1 − (1 − k/E)^T): the expected number of routed experts (of E, top-k
                            routing) that T tokens reach in one layer, if each token's k experts are a
                            uniform draw (real routers are skewed: fewer distinct experts, so fewer bytes).
                            T = 1 gives k; a large T gives E.

Mixed formats: a model may ship its routed experts in one format and everything else in another
(gpt-oss: experts in mxfp4, attention, router, embeddings and LM head in bf16). ``expert_dtype`` names
the experts' format; it applies when the deployment runs the model in its own format (``native_dtype``),
and a deployment in any other format quantises the experts with the rest. Bytes per component:

    expert bytes          = expert params × expert format's bits / 8
    other bytes           = as above for the rest (params − expert params) in the weight format

Sliding-window attention (gpt-oss alternates 128-token windows with full attention, Gemma 3 has five
window layers in six): a window layer keeps and attends to at most ``sliding_window`` tokens of a
sequence, so its cache stops growing with the context. Cache and reads are counted per layer kind, in
layer-tokens: a sequence holding t tokens keeps

    cached layer-tokens   = KV layers × t + window layers × min(t, W)                (`cached_layer_tokens`)

(× KV elements per layer-token = its cache), and a step over S sequences holding C cached tokens in all
reads S × cached layer-tokens(C / S) of KV and does as many (query, key) pairs per layer in decode
(`attended_tokens`); a prefill's i-th new token of a sequence with c cached attends to min(c + i, W)
keys in a window layer (`attended_pairs`). The KV per token is therefore the full layers' only, and a
sequence's cache is that × t plus its window layers' bounded part (gpt-oss-120b in bf16: 36 KiB a token
and at most 4.5 MiB a sequence for its 128-token windows). This is how the engines of 2026 keep such
caches (vLLM's hybrid KV-cache manager, with its sliding-window and chunked-local specs; SGLang's
sliding-window pool; llama.cpp's SWA cache): each frees what leaves the window. An engine that keeps the
whole cache and reads it masked (llama.cpp with ``--swa-full``, which tokometer's embedded engine passes to
keep its prefix cache; TensorRT-LLM, whose chunked attention applies to prompts only and whose per-layer
windows are allocated at the longest, per its "Long Sequences" page) runs the model as if it had no
windows: `without_windows`, which `tokometer.perf.roofline.Deployment.full_window_cache` applies. Llama 4's
chunked attention (8,192-token chunks, three layers in four) is counted as a sliding window of the chunk's
length: a chunk holds between 1 and W tokens, so past the first chunk this is an upper bound (W/2 on
average).

Sparse attention (DeepSeek Sparse Attention: DeepSeek V3.2, GLM-5): every layer keeps its whole cache, but
a small indexer picks ``sparse_topk`` of a query's cached tokens (2,048) and the attention runs over those
alone. The indexer scores every cached token: its own key cache, one head of ``indexer_head_dim`` a token
in fp8 with a 4-byte scale (`INDEXER_KEY_BYTES` + the head dim, as vLLM and SGLang keep it), is read whole,
and it costs 2 × ``indexer_heads`` × ``indexer_head_dim`` FLOPs a (query, key) pair, in each layer that runs
one (`indexer_layer_count`: every layer, or GLM-5's one in four). So past 2,048 tokens a step reads
min(t, k) of the latent cache a sequence and layer plus t of the indexer's keys (`attended_tokens`,
`indexer_tokens`); a prefill's i-th token attends to min(c + i, k) keys (`attended_pairs`) and the indexer
scores all c + i (`indexer_pairs`).

Linear attention and state-space layers (Qwen3-Next's and Qwen3.5's Gated DeltaNet, three layers in four; Mamba2
in Nemotron-H): a recurrent layer keeps no KV cache but a fixed state a sequence, whatever its
length, `recurrent_state_bytes` (`tokometer.perf.hybrid` works it from the config: a Gated DeltaNet's
value heads × key dim × value dim, a Mamba2's heads × head dim × state size, in ``mamba_ssm_dtype`` (fp32) or the
model's dtype, and its short convolution's (kernel − 1) inputs in the model's dtype; the KV cache's format does
not apply, as vLLM and SGLang keep it). A decode step reads each sequence's state and writes it back, and spends
`recurrent_flops_per_token` a token and layer on the recurrence (6 × heads × key dim × value dim: the decay and
rank-one update, and the read-out, each one pass over the state). So

    KV layers             = layers − window layers − recurrent layers
    state a sequence      = recurrent layers × `recurrent_state_bytes`                (`recurrent_bytes_per_sequence`)

and a sequence's cache is its full layers' KV × t, its window layers' bounded part, and its state.

Loaders for built-in names, config.json and GGUF headers (read by `tokometer.util.gguf`) live in
`tokometer.perf.loaders`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

from tokometer.perf.quant import default_kv_dtype, normalize_dtype, weight_dtype

__all__ = ["INDEXER_KEY_BYTES", "MAX_EXPERTS_PER_GPU", "MAX_TP", "ModelSpec", "tensor_parallel_problem"]

INDEXER_KEY_BYTES = 4
"""Bytes a sparse-attention indexer key takes beside its fp8 head: its fp32 scale (vLLM's and SGLang's
DeepSeek V3.2 indexer cache: 128 fp8 values + 4 bytes a token and layer)."""

MAX_EXPERTS_PER_GPU = 4096
"""Above this many experts a GPU, expert parallelism's imbalance is taken as nil (`ModelSpec.busiest_gpu_experts`)."""

MAX_TP = 64
"""The largest tensor-parallel size accepted: far beyond one node (8 GPUs), beyond any real deployment."""


def tensor_parallel_problem(name: str, heads: int, kv_heads: int, tp: int) -> str | None:
    """Why ``tp`` GPUs cannot split a model's attention (the rule vLLM and SGLang enforce), or None.

    The attention heads must divide evenly; the KV heads must too, or (fewer KV heads than GPUs) be
    replicated a whole number of times. ``heads``/``kv_heads`` 0: unknown, not checked.
    """
    def fits(size: int) -> bool:
        if heads and heads % size:
            return False
        return not (kv_heads and kv_heads % size and size % kv_heads)

    if tp < 1:
        return f"it must be at least 1 (got {tp})"
    sizes = ", ".join(str(size) for size in range(1, MAX_TP + 1) if fits(size))
    if tp > MAX_TP:
        return f"at most {MAX_TP} GPUs are modelled (got {tp}); sizes that split {name}: {sizes}"
    if heads and heads % tp:
        return f"{name}'s {heads} attention heads do not split evenly over {tp} GPUs; sizes that do: {sizes}"
    if not fits(tp):
        return (f"{name}'s {kv_heads} KV heads neither split evenly over {tp} GPUs nor replicate a whole number of "
                f"times; sizes that work: {sizes}")
    return None


def _causal_pairs(t: float, c: float) -> float:
    """(query, key) pairs of t new tokens after c cached, each attending to every key before it: Σ (c + i)."""
    return t * c + t * (t + 1) / 2


def _capped_pairs(t: float, c: float, w: int) -> float:
    """(query, key) pairs of t new tokens after c cached when each attends to at most w keys: the i-th new token
    (1 ≤ i ≤ t) attends to min(c + i, w)."""
    first, last = c + 1, c + t  # the keys the first and the last new token attend to, uncapped
    below_end = min(last, w)
    below = (first + below_end) * (below_end - first + 1) / 2 if below_end >= first else 0.0
    above = (last - max(first - 1, w)) * w if last > w else 0.0
    return below + above


@dataclass(frozen=True)
class ModelSpec:
    """One model's architecture. ``weight_bytes`` is the exact size in ``native_dtype`` when known."""

    name: str
    params: float
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    max_context: int
    intermediate: int = 0
    active_params: float | None = None  # mixture of experts: parameters used per token
    experts: int = 0
    experts_per_token: int = 0
    v_head_dim: int = 0  # 0: same as head_dim
    kv_lora_rank: int = 0  # multi-head latent attention (DeepSeek-V2/V3): compressed KV width
    qk_rope_head_dim: int = 0
    sliding_window: int = 0  # tokens a window layer attends to (0: no window layers)
    sliding_layers: int = 0  # layers with a sliding window (their cache stays bounded)
    chunked_windows: bool = False  # the window layers attend within fixed chunks (Llama 4), not a sliding window
    sparse_topk: int = 0  # sparse attention: cached tokens a query attends to, picked by an indexer (0: dense)
    indexer_heads: int = 0  # the sparse attention's indexer: its query heads (index_n_heads)
    indexer_head_dim: int = 0  # and their width (index_head_dim); its key cache: one such head a token
    indexer_layers: int = 0  # layers that run their own indexer (GLM-5 shares one over four); 0: every layer
    recurrent_layers: int = 0  # linear-attention or state-space layers: a fixed state a sequence, no KV cache
    recurrent_state_bytes: int = 0  # one such layer's state a sequence, in bytes (recurrence + convolution)
    recurrent_flops_per_token: int = 0  # one such layer's recurrence, FLOPs a token
    expert_dtype: str = ""  # the routed experts' own format when it differs from native_dtype (gpt-oss: mxfp4)
    expert_width: int = 0  # a routed expert's intermediate size (moe_intermediate_size); 0: from the parameters
    tied_embeddings: bool = False
    native_dtype: str = "bf16"
    native_kv_dtype: str = ""  # the KV format the checkpoint declares (engines take it by default); "": none
    kept_params: float = 0.0  # linear-layer params outside the routed experts its checkpoint keeps in 16 bits
    kept_expert_params: float = 0.0  # and routed-expert params (ModelOpt exclude_modules: tokometer.perf.unquantized)
    native_bits: float = 0.0  # bits a weight in its own 4-bit format, from its config's groups; 0: the format's
    native_expert_bits: float = 0.0  # the same of a routed expert's weight in its own format (expert_dtype)
    weight_bytes: float | None = None
    hf_id: str = ""
    source: str = "built-in table"

    @property
    def active(self) -> float:
        """Parameters each token is multiplied with (all of them for a dense model)."""
        return self.active_params if self.active_params else self.params

    @property
    def is_moe(self) -> bool:
        return self.experts > 1 and self.experts_per_token > 0 and self.active < self.params

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def kv_layers(self) -> int:
        """Layers whose KV cache grows with the context: all but the window layers (`window_layers`) and the
        recurrent ones (`recurrent_layers`)."""
        return self.layers - self.window_layers - self.recurrent_layers

    @property
    def recurrent_bytes_per_sequence(self) -> float:
        """Bytes of recurrent state a sequence keeps, all its linear-attention or state-space layers (0: none)."""
        return float(self.recurrent_layers * self.recurrent_state_bytes)

    def tp_problem(self, tp: int) -> str | None:
        """Why ``tp`` GPUs cannot split this model's attention, or None (see `tensor_parallel_problem`)."""
        return tensor_parallel_problem(self.name, self.heads, 0 if self.is_mla else self.kv_heads, tp)

    @property
    def kv_elements_per_layer(self) -> int:
        """Cache elements one token adds in one layer: 2 × KV heads × head dim (MLA: rank + RoPE dim)."""
        return self.kv_lora_rank + self.qk_rope_head_dim if self.is_mla else 2 * self.kv_heads * self.head_dim

    @property
    def kv_elements_per_token(self) -> int:
        """Cache elements one token adds in the layers whose cache grows with the context: KV layers × per layer
        (2 × KV heads × head dim; MLA: rank + RoPE dim)."""
        return self.kv_layers * self.kv_elements_per_layer

    def cached_layer_tokens(self, tokens: float) -> float:
        """Layer-tokens of cache a sequence holding ``tokens`` keeps: KV layers × t + window layers × min(t, W)."""
        return self.kv_layers * tokens + self.window_layers * min(tokens, self.sliding_window)

    @property
    def attention_flops_per_pair(self) -> int:
        """FLOPs for one query attending to one key, all KV layers: 2 × layers × heads × (head dim + V head dim)."""
        return self.kv_layers * self.attention_flops_per_layer_pair

    @property
    def attention_flops_per_layer_pair(self) -> int:
        """FLOPs for one query attending to one key in one layer: 2 × heads × (head dim + V head dim). A prefill's
        (with multi-head latent attention too: its prompts run the attention with the keys and values expanded
        from the latent, every head of head dim + V head dim)."""
        return 2 * self.heads * (self.head_dim + (self.v_head_dim or self.head_dim))

    @property
    def decode_attention_flops_per_layer_pair(self) -> int:
        """A decode step's FLOPs for one query attending to one cached token in one layer: as a prefill's, but with
        multi-head latent attention 2 × heads × (2 × KV LoRA rank + RoPE dim). Decoding, the engines (DeepSeek's
        own inference code, FlashMLA, vLLM, SGLang, TensorRT-LLM) run it absorbed: each head's query is multiplied
        into the latent space, so every head scores the cached latent and RoPE key (rank + RoPE dim) and sums the
        latents (rank) rather than expanded keys and values; the cache is read once for all heads, which makes the
        step's attention bound by these FLOPs, not by its KV read (DeepSeek R1: 278,528 FLOPs a layer-pair, 3.4
        times the expanded form's 81,920)."""
        if self.is_mla:
            return 2 * self.heads * (2 * self.kv_lora_rank + self.qk_rope_head_dim)
        return self.attention_flops_per_layer_pair

    @property
    def decode_attention_flops_per_pair(self) -> int:
        """A decode step's FLOPs for one query attending to one cached token, all KV layers
        (`decode_attention_flops_per_layer_pair`)."""
        return self.kv_layers * self.decode_attention_flops_per_layer_pair

    @property
    def window_layers(self) -> int:
        """Layers that attend to a window of at most `sliding_window` tokens (sliding, or Llama 4's chunks)."""
        return min(self.sliding_layers, self.layers - self.recurrent_layers - 1) if self.sliding_window > 0 else 0

    def attended_tokens(self, sequences: float, context_tokens: float) -> float:
        """Layer-tokens a step's attention reads for ``sequences`` holding ``context_tokens`` cached in all, one query
        each: L_full × C + L_window × S × min(C / S, W); with sparse attention L × S × min(C / S, k) (module
        docstring)."""
        if (not self.window_layers and not self.sparse_topk) or sequences <= 0:
            return self.kv_layers * context_tokens
        t = context_tokens / sequences
        full = min(t, self.sparse_topk) if self.sparse_topk else t
        return sequences * (self.kv_layers * full + self.window_layers * min(t, self.sliding_window))

    @property
    def indexer_layer_count(self) -> int:
        """Layers that run a sparse-attention indexer (0 for dense attention)."""
        if not self.sparse_topk:
            return 0
        return min(self.indexer_layers, self.layers) if self.indexer_layers else self.layers

    @property
    def indexer_key_bytes(self) -> int:
        """Bytes of one token's indexer key in one indexer layer: head dim (fp8) + `INDEXER_KEY_BYTES` (0: none)."""
        return self.indexer_head_dim + INDEXER_KEY_BYTES if self.indexer_layer_count and self.indexer_head_dim else 0

    @property
    def indexer_bytes_per_token(self) -> float:
        """Bytes of indexer keys a token adds, all indexer layers (`indexer_key_bytes` each)."""
        return self.indexer_layer_count * self.indexer_key_bytes

    @property
    def indexer_flops_per_layer_pair(self) -> int:
        """FLOPs the indexer spends scoring one cached token for one query in one layer: 2 × heads × head dim."""
        return 2 * self.indexer_heads * self.indexer_head_dim

    def indexer_tokens(self, context_tokens: float) -> float:
        """Layer-tokens of indexer keys a decode step scores (and reads) for ``context_tokens`` cached in all."""
        return self.indexer_layer_count * context_tokens

    def indexer_pairs(self, sequences: float, new_tokens: float, cached_tokens: float = 0) -> float:
        """Layer-(query, key) pairs the indexer scores in a prefill (causal, uncapped: it scores every key)."""
        if not self.indexer_layer_count:
            return 0.0
        n = sequences if sequences > 0 else 1.0
        return self.indexer_layer_count * n * _causal_pairs(new_tokens / n, cached_tokens / n)

    def attention_flops(self, sequences: float, context_tokens: float) -> float:
        """A decode step's attention FLOPs for ``sequences`` holding ``context_tokens`` cached in all: the pairs it
        attends to (`attended_tokens`), its sparse-attention indexer's scoring of every cached token, and its
        recurrent layers' recurrence for each sequence's new token."""
        return (self.decode_attention_flops_per_layer_pair * self.attended_tokens(sequences, context_tokens)
                + self.indexer_flops_per_layer_pair * self.indexer_tokens(context_tokens)
                + self.recurrent_layers * self.recurrent_flops_per_token * max(0.0, sequences))

    def prefill_attention_flops(self, sequences: float, new_tokens: float, cached_tokens: float = 0) -> float:
        """A prefill's attention FLOPs (`attended_pairs`), its indexer's (`indexer_pairs`) and its recurrent layers'
        (each new token once a layer, whatever the context)."""
        return (self.attention_flops_per_layer_pair * self.attended_pairs(sequences, new_tokens, cached_tokens)
                + self.indexer_flops_per_layer_pair * self.indexer_pairs(sequences, new_tokens, cached_tokens)
                + self.recurrent_layers * self.recurrent_flops_per_token * max(0.0, new_tokens))

    def without_windows(self) -> ModelSpec:
        """This model as an engine that keeps and reads the whole cache of its window layers runs it (llama.cpp's
        ``--swa-full``, TensorRT-LLM): every layer a full one (itself when it has no windows)."""
        return replace(self, sliding_window=0, sliding_layers=0) if self.window_layers else self

    def attended_pairs(self, sequences: float, new_tokens: float, cached_tokens: float = 0) -> float:
        """Layer-(query, key) pairs of a prefill of ``new_tokens`` over ``sequences``, each with its share of
        ``cached_tokens`` already cached: causal, the i-th new token of a sequence with c cached attends to c + i
        keys in a full layer (min(c + i, k) with sparse attention) and min(c + i, W) in a window layer. A fraction
        of a sequence is a step's share of prompts prefilled over many steps: 0.25 sequence of 500 tokens is a
        quarter of one 2,000-token prompt's pairs, not the pairs of a 500-token prompt."""
        n = sequences if sequences > 0 else 1.0
        t, c = new_tokens / n, cached_tokens / n
        per_full = _capped_pairs(t, c, self.sparse_topk) if self.sparse_topk else _causal_pairs(t, c)
        full = self.kv_layers * n * per_full
        if not self.window_layers:
            return full
        return full + self.window_layers * n * _capped_pairs(t, c, self.sliding_window)

    @property
    def lm_head_params(self) -> float:
        """The LM head (vocab × hidden): run for every decoded token, but once per prompt in prefill."""
        return float(self.vocab * self.hidden)

    @property
    def matmul_params(self) -> float:
        """Parameters one token is multiplied with: active, less the input embedding table when untied."""
        return self.active - (0.0 if self.tied_embeddings else self.lm_head_params)

    @cached_property
    def activation_elements_per_token(self) -> float:
        """Activation elements one token's matmuls read and write in a step, all layers: each GEMM's input and
        output (QKV, the attention's output projection, the MLP's gate/up and down, once for each of a token's k
        routed experts). The MLP's width comes from the parameters: a layer's matmul parameters less its
        attention's, over the hidden size, is 3 × its intermediate size (gate, up and down)."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        attention = self.hidden * (q + 2 * kv) + q * self.hidden
        mlp = max(0.0, (self.matmul_params - self.lm_head_params) / self.layers - attention)
        gemms = self.experts_per_token if self.is_moe else 1
        return self.layers * (2 * self.hidden + 2 * q + 2 * kv + mlp / self.hidden + 2 * self.hidden * gemms)

    @property
    def embedding_params(self) -> float:
        """Input embedding table plus LM head (one matrix when tied)."""
        return float(self.vocab * self.hidden * (1 if self.tied_embeddings else 2))

    @property
    def expert_params(self) -> float:
        """Parameters in routed experts (0 for a dense model): (params − active) × E / (E − k)."""
        if not self.is_moe:
            return 0.0
        e, k = self.experts, self.experts_per_token
        return min(self.params, (self.params - self.active) * e / (e - k))

    @property
    def routed_expert_width(self) -> float:
        """A routed expert's intermediate size: `expert_width`, else its parameters / (layers × 3 × hidden) (gate,
        up and down in every layer; an undercount where only some layers have experts). 0 for a dense model."""
        if not self.is_moe:
            return 0.0
        return float(self.expert_width) if self.expert_width else (
            self.expert_params / self.experts / self.layers / (3 * self.hidden))

    def expert_fraction_read(self, tokens: int) -> float:
        """Share of the routed experts a step of ``tokens`` tokens touches: 1 − (1 − k/E)^tokens."""
        if not self.is_moe or tokens <= 0:
            return 1.0 if tokens > 0 else 0.0
        return 1.0 - (1.0 - self.experts_per_token / self.experts) ** tokens

    def expected_experts(self, tokens: int) -> float:
        """Expected distinct routed experts ``tokens`` tokens reach in one layer: E × (1 − (1 − k/E)^T)."""
        return self.experts * self.expert_fraction_read(tokens) if self.is_moe else 0.0

    def busiest_gpu_experts(self, tokens: int, gpus: int) -> float:
        """Expected touched experts on the busiest of ``gpus`` GPUs that hold E / gpus whole experts each.

        Each expert is taken as touched independently with p = 1 − (1 − k/E)^tokens, so a GPU's count is
        Binomial(E / gpus, p) and E[max] = Σ_{j ≥ 1} (1 − F(j − 1)^gpus). One GPU, or more than
        `MAX_EXPERTS_PER_GPU` experts on each, gives the average E × p / gpus (the imbalance vanishes)."""
        if not self.is_moe or gpus <= 1:
            return self.expected_experts(tokens) / max(1, gpus)
        n, p = self.experts // gpus, self.expert_fraction_read(tokens)
        if n > MAX_EXPERTS_PER_GPU or p <= 0.0 or p >= 1.0:
            return self.expected_experts(tokens) / gpus
        pmf, cdf, expected = (1.0 - p) ** n, 0.0, 0.0
        for j in range(n):
            cdf += pmf
            expected += 1.0 - min(1.0, cdf) ** gpus
            pmf *= (n - j) / (j + 1) * p / (1.0 - p)
        return expected

    def is_native(self, dtype: str) -> bool:
        """Whether ``dtype`` is the format the model ships in (its exact size and mixed formats apply)."""
        return normalize_dtype(dtype) == normalize_dtype(self.native_dtype)

    def default_kv(self, dtype: str) -> str:
        """The KV format a deployment in ``dtype`` gets when none is named: the one the checkpoint declares when it
        runs in its own format (``native_kv_dtype``), else the format's default (`default_kv_dtype`)."""
        return self.native_kv_dtype if self.native_kv_dtype and self.is_native(dtype) else default_kv_dtype(dtype)

    def expert_format(self, dtype: str) -> str:
        """The routed experts' format when the model runs in ``dtype``: their own if it is the native one."""
        return self.expert_dtype if self.expert_dtype and self.is_native(dtype) else normalize_dtype(dtype)

    def bits_for(self, dtype: str) -> float:
        """Bits a quantised weight takes in ``dtype``: the checkpoint's own (``native_bits``: its group size and
        zero points) when it runs in its own format and its config gave them, else the format's."""
        return self.native_bits if self.native_bits and self.is_native(dtype) else weight_dtype(dtype).bits

    def expert_bits_for(self, dtype: str) -> float:
        """Bits a routed expert's weight takes in ``dtype``: in a format of their own while the model runs in its
        own, the checkpoint's (``native_expert_bits``) where its config gave them, else that format's; otherwise as
        any weight (`bits_for`)."""
        experts = weight_dtype(self.expert_format(dtype))
        if experts.name == weight_dtype(dtype).name:
            return self.bits_for(dtype)
        return self.native_expert_bits if self.native_expert_bits and self.is_native(dtype) else experts.bits

    def weight_bytes_split(self, dtype: str) -> tuple[float, float]:
        """(bytes of everything but the routed experts, bytes of the routed experts) in ``dtype``, the
        experts in `expert_format` (`expert_bits_for`); in a format of the linear layers the embeddings in 16 bits,
        and in the model's own format the modules its checkpoint keeps so too (``kept_params``,
        ``kept_expert_params``); scaled to the exact size when ``dtype`` is the model's own format and its files'
        size is known."""
        fmt, experts_fmt = weight_dtype(dtype), weight_dtype(self.expert_format(dtype))
        native = self.is_native(dtype)
        rest_params = self.params - self.expert_params
        kept_experts = min(self.kept_expert_params, self.expert_params) if native and experts_fmt.linear_only else 0.0
        expert_bytes = self.expert_bits_for(dtype) / 8
        experts = (self.expert_params - kept_experts) * expert_bytes + kept_experts * 2.0
        if fmt.linear_only:
            sixteen = min(self.embedding_params + (self.kept_params if native else 0.0), rest_params)
            rest = (rest_params - sixteen) * self.bits_for(dtype) / 8 + sixteen * 2.0
        else:
            rest = rest_params * fmt.bytes_per_weight
        if self.weight_bytes and native:
            scale = self.weight_bytes / (rest + experts)
            return rest * scale, experts * scale
        return rest, experts

    def weight_bytes_for(self, dtype: str) -> float:
        """Bytes of all weights in ``dtype`` (the exact size when it is the model's own format)."""
        if self.weight_bytes and self.is_native(dtype):
            return self.weight_bytes
        return sum(self.weight_bytes_split(dtype))

    def shape(self) -> str:
        """Size and shape in one line: params (active for MoE), layers, hidden, attention, vocab, context."""
        moe = (f", MoE {self.experts} experts / {self.experts_per_token} per token, {self.active / 1e9:.1f} B active"
               if self.is_moe else "")
        attn = (f"MLA rank {self.kv_lora_rank}+{self.qk_rope_head_dim}" if self.is_mla
                else f"{self.heads} heads / {self.kv_heads} KV heads × {self.head_dim}")
        if self.sliding_window and self.sliding_layers:
            attn += f", {self.sliding_layers} layers with a {self.sliding_window:,}-token window"
        if self.sparse_topk:
            attn += f", sparse: {self.sparse_topk:,} keys a query"
        if self.recurrent_layers:
            attn += (f", {self.recurrent_layers} recurrent layers (linear attention / state space; "
                     f"{self.recurrent_state_bytes / 1e6:.2f} MB of state a sequence each)")
        if self.expert_dtype:
            moe += f", experts in {self.expert_dtype}"
        return (f"{self.params / 1e9:.2f} B params{moe}, {self.layers} layers, hidden {self.hidden}, {attn}, "
                f"vocab {self.vocab:,}, context {self.max_context:,}")

    def describe(self) -> str:
        """One line: name, size, shape and where the facts came from."""
        return f"{self.name}: {self.shape()} ({self.source})"
