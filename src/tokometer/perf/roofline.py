"""The roofline arithmetic: memory, decode step time and prefill time of a deployment. Pure and fast.

Notation: W = weight bytes, M = parameters a token is multiplied with, L = layers, h_kv = KV heads, d = head dim,
b = bytes per KV element, BW = one GPU's memory bandwidth (B/s), F = one GPU's peak FLOP/s for
the weight format's compute type, F_att = its peak for the attention's (`Deployment.attention_compute_dtype`:
fp8 with an fp8 KV cache, else bf16; never fp4), TP / PP = tensor / pipeline parallel degrees, A = the
activation elements one token's matmuls read and write (`ModelSpec.activation_elements_per_token`).

    weights per GPU        = W / (TP × PP)
    KV per token           = 2 × L × h_kv × d × b                     (whole model)
    KV per token per GPU   = 2 × ⌈L / PP⌉ × ⌈h_kv / TP⌉ × d × b         (heads replicated when h_kv < TP)
    KV capacity (tokens)   = ⌊(GPU memory × utilisation − weights per GPU − reserve) / KV per token per GPU⌋
    sequences that fit     = ⌊(the same budget) / KV per sequence per GPU⌋   (`Deployment.kv_sequences`)

L here is the layers whose cache grows with the context (`ModelSpec.kv_layers`); a model's window layers
keep at most their window of each sequence (`ModelSpec.cached_layer_tokens`), so a sequence of t tokens
takes KV per token per GPU × t + its window layers' 2 × ⌈L_window / PP⌉ × ⌈h_kv / TP⌉ × d × b × min(t, W).
A linear-attention or state-space layer keeps a fixed state a sequence instead (`ModelSpec.recurrent_state_bytes`,
its heads split over TP): ⌈L_recurrent / PP⌉ × state / TP more a sequence, read and written back every step.

    decode step            = matmuls + attention + L × e_layer     one token for each of `batch` sequences
      matmuls              = max((W_read + 2 B × A × batch) / TP / (BW × e_bw),
                                 (2 × M × batch + experts' extra FLOPs) / (TP × F × e_decode))
      attention            = max(KV per token on the critical path × context / (BW × e_bw),
                                 attention FLOPs per pair × context / (TP × F_att × e_decode))
      decode FLOPs         = 2 × M × batch + attention FLOPs per pair × context

    prefill of T tokens    = max(matmul FLOPs / (TP × F × e_prefill) + attention FLOPs / (TP × F_att × e_prefill),
                                 memory floor (W_read + 2 B × A × T) / TP + KV per token × (context + T)) / (BW × e_bw))
                             + L × e_layer
      matmul FLOPs         = 2 × (M − V·h) × T + 2 × V·h × sequences (+ the experts' extra FLOPs)
      attention FLOPs      = attention FLOPs per pair × pairs
      pairs                = T × C + T (T + 1) / 2     (causal: each new token attends to the C earlier
                                                        tokens and to the new ones up to itself)

The matmuls move their activations as well as their weights: each GEMM reads its input and writes its output
(2 B an element), which at a large batch of a small model (a mixture of experts with k = 8 routed experts a
token) is as many bytes as the weights. The routed experts of a mixture of experts run as one grouped GEMM
whose rows, each expert's tokens, are padded to the kernel's tile (`tokometer.perf.groupedgemm`) and which
reaches a share of the dense matmuls' efficiency that grows with the experts' width
(`Efficiency.expert_share`: w / (w + `Efficiency.expert_half_width`), w the experts' intermediate size, whole
whether or not each expert is split over the TP GPUs: `Deployment.expert_gemm_width`): their FLOPs count as
2 × M_e / E × padded rows / share instead of 2 × k × M_e / E per token (`expert_extra_flops`).

The matmuls and the attention are separate kernels run one after the other in every layer, so each is its
own roofline and their times add: at a small batch both are bandwidth bound and the sum is the memory time
(W_read / TP + KV × context) / (BW × e_bw); at a large batch the matmuls turn compute bound while the
attention stays bound by its KV read, which no longer hides under them. e_layer (`Efficiency.layer_overhead_s`)
is the fixed cost of each layer in every step, whatever its size (kernel launches and tails, the barriers
between kernels); the bound has none.

M is `ModelSpec.matmul_params` (the active parameters less the input embedding table, which is a
lookup; for Llama-3.1-8B 8.03 B − 0.53 B = 7.50 B) and V·h the LM head, which engines run for the
last prompt token only. W counts every weight, the input table too (a step reads only a row of it),
as the textbook figure does: the bandwidth bound is conservative by that table.

`context` is the number of tokens in the KV caches of all sequences of the batch together. The
critical-path KV read per token and layer is 2 × ⌈h_kv / TP⌉ × d × b (MLA: (rank + RoPE dim) × b, the
latent cache is replicated on every TP rank), times the layer-tokens the step attends to
(`ModelSpec.attended_tokens`: every layer's context, a sliding-window or chunked layer's at most its window
a sequence: `Deployment.kv_read_bytes`); the attention's FLOPs count the same layer-tokens (a prefill's:
`ModelSpec.attended_pairs`). Written below as "KV per token × context" for models without windows.
W_read is the weights a step touches: all of them for a dense model; for a
mixture of experts (E routed experts, top-k routing)

    W_read = W_other + W_experts × (1 − (1 − k/E)^T)

the weights outside the routed experts (attention, router, shared experts, dense layers, embeddings:
read every step) plus the routed experts that at least one of the step's T tokens reaches, assuming
each token's k experts are a uniform draw (`ModelSpec.expected_experts`: k at T = 1, all E at large
T). A decode step of batch B has T = B: at B = 1 it reads the active parameters, at B = 64 on
gpt-oss-120b (E = 128, k = 4) 1 − (1 − 4/128)^64 = 87 % of the experts. A prefill's T is its prompt
tokens (all the experts, for any prompt of a few hundred tokens). Each component is in its own format
(`ModelSpec.weight_bytes_split`: gpt-oss's experts in mxfp4, the rest in bf16).

Expert parallelism: the experts are split over the TP GPUs. By default each expert is sharded TP
ways (vLLM's default): a GPU holds W_experts / TP and reads 1/TP of every touched expert, so W_read /
TP is its bytes a step. With ``expert_parallel`` (vLLM's ``--enable-expert-parallel``) each GPU holds
E / TP whole experts and reads the touched ones among them; the step waits for the busiest GPU, which
at a small batch holds more touched experts than the average (gpt-oss-120b on 8 GPUs at batch 1: 4
touched experts, 0.5 a GPU on average, but 1.6 expected on the busiest):

    W_read (expert parallel) = W_other + TP × E[touched experts on the busiest GPU] × W_experts / E

(`ModelSpec.busiest_gpu_experts`, each expert taken as touched independently), so that W_read / TP
is still the bytes on the critical path of one GPU; at a large batch every GPU reads all of its
experts and the two agree.

Attention data parallel (``attention_dp``, SGLang's ``--enable-dp-attention``, TensorRT-LLM's
``enable_attention_dp``; a mixture of experts only): each of the TP GPUs runs the attention of its own
1/TP of the sequences with every head and a whole copy of the weights outside the routed experts, which
stay split over the GPUs as above. A GPU then holds W_other + W_experts / TP, reads W_other whole every
step (W_read counts it TP times, so / TP stays one GPU's bytes), keeps 1/TP of every sequence's KV with
no head copied (2 × L × h_kv × d × b / TP a token), and its engine rank schedules its own sequences:
the batch limit is each rank's, and the step's collectives are an all-gather of the tokens before each
experts' layer and a reduce-scatter after, with no attention all-reduce.

Tensor parallelism divides the work over TP GPUs; their communication (two all-reduces per layer, with
or without expert parallelism: every GPU holds every token after the attention's all-reduce) is added
to every step over the hardware's link (`tokometer.perf.collective`, where the assumptions are). Pipeline
parallelism splits the layers over PP stages: the memory each GPU holds, not a token's path; with as many
sequences as stages the engine keeps PP microbatches in flight, so a batch B steps as the whole model at B / PP
(`pipeline_microbatch`, `mixed_step_s`):

    step = matmuls + attention + communication(tokens of the step) + L × e_layer

A step that decodes and prefills at once (chunked prefill) is `mixed_step_s`: one weight read for all
its tokens, the prompt tokens' FLOPs added to the decode's kernels.

Pipeline parallelism divides memory but not a token's latency: a token still passes every stage in
turn, so PP appears in the memory lines only. An efficiency of
``None`` gives the bound itself (100 %); `Efficiency` states typical fractions instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property

from tokometer.perf.collective import ACTIVATION_BYTES, communication_s
from tokometer.perf.groupedgemm import padded_expert_rows
from tokometer.perf.hardwarespec import ComputePeak, HardwareSpec
from tokometer.perf.model import ModelSpec
from tokometer.perf.quant import kv_bytes, normalize_dtype, weight_dtype
from tokometer.util.errors import ConfigError
from tokometer.util.units import GIB

__all__ = [
    "ACTIVATION_RESERVE_GIB",
    "BOUND",
    "FIT_GEMM_FRACTION",
    "Deployment",
    "Efficiency",
    "compute_bound_batch",
    "decode_flops",
    "decode_limiter",
    "decode_step_s",
    "embedding_pass_s",
    "expert_extra_flops",
    "kv_format_problem",
    "matmul_bytes",
    "mixed_step_s",
    "pipeline_microbatch",
    "pipeline_share",
    "prefill_flops",
    "prefill_flops_split",
    "prefill_s",
    "step_overhead_s",
    "weight_bytes_read",
]

ACTIVATION_RESERVE_GIB = 2.0
FIT_GEMM_FRACTION = 0.693
"""The share of the datasheet peak the fit split's GPUs (H100, H200) sustain in a dense GEMM (their table rows'
``gemm_fraction``): the typical compute efficiencies are relative to it."""


@dataclass(frozen=True)
class Efficiency:
    """Fractions of peak a well-tuned engine typically reaches (MBU 55–85 % in decode; MFU 45–60 %), its fixed cost
    per layer of a step, and the share of that efficiency a mixture of experts' grouped expert GEMMs reach. All
    five, and the grouped GEMM's tile (`tokometer.perf.groupedgemm`), were chosen together on the fit split of
    the published figures only (`tokometer.perf.published`: 89 figures, the most within ±15 %, then the lowest
    median error, over a grid), never on a held-out figure."""

    decode_bandwidth: float = 0.825
    prefill_compute: float = 0.6
    decode_compute: float = 0.4
    layer_overhead_s: float = 70e-6
    """Fixed time per layer of every step, whatever its size: the launch and tail of the layer's kernels and
    the barriers between them (0 in the bound)."""
    expert_half_width: float = 3072.0
    """The routed expert width (intermediate size) at which a mixture of experts' grouped expert GEMMs reach half
    the dense matmuls' efficiency: an expert of width w reaches w / (w + this) of it (Qwen3-30B-A3B's 768: 20 %,
    Mixtral's 14,336: 82 %), as a narrow GEMM's fixed costs per tile weigh more; 0: the dense efficiency."""

    def __post_init__(self) -> None:
        for name in ("decode_bandwidth", "prefill_compute", "decode_compute"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise ConfigError(f"efficiency {name} must be in (0, 1] (got {value})")
        if not 0 <= self.layer_overhead_s < 1e-3:
            raise ConfigError(f"efficiency layer_overhead_s must be in [0, 1 ms) (got {self.layer_overhead_s})")
        if not 0 <= self.expert_half_width < 1e6:
            raise ConfigError(f"efficiency expert_half_width must be in [0, 1e6) (got {self.expert_half_width})")

    def expert_share(self, width: float) -> float:
        """The share of the dense matmuls' efficiency a routed expert of ``width`` reaches: w / (w + half width)."""
        return width / (width + self.expert_half_width) if width > 0 else 1.0


BOUND = Efficiency(1.0, 1.0, 1.0, 0.0, 0.0)


def kv_format_problem(kv_dtype: str, hardware: HardwareSpec) -> str | None:
    """Why ``hardware`` cannot hold a KV cache in ``kv_dtype`` (None: it can): an NVFP4 cache needs fp4 tensor cores
    that take NVFP4, told by a row that lists its peaks (a row of memory alone, as a vLLM plan's, is not judged)."""
    if normalize_dtype(kv_dtype) == "nvfp4" and hardware.bf16_tflops and not (
            hardware.fp4_tflops and "nvfp4" in hardware.fp4_formats):
        return (f"an NVFP4 KV cache needs fp4 tensor cores that take NVFP4 (Blackwell: B200, B300, GB200, GB300, "
                f"RTX PRO 6000); {hardware.name} has none")
    return None


@dataclass(frozen=True)
class Deployment:
    """A model on hardware in a weight format and KV-cache format, over TP × PP GPUs."""

    model: ModelSpec
    hardware: HardwareSpec
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    tp: int = 1
    pp: int = 1
    expert_parallel: bool = False  # whole experts, E / TP on each GPU, rather than each expert split TP ways
    full_window_cache: bool = False
    """The engine keeps and reads the whole cache of the model's window layers, as of its full ones (llama.cpp's
    ``--swa-full``; TensorRT-LLM, whose chunked attention applies to prompts only and whose sliding-window cache
    is allocated at its longest window): the model is taken without its windows (`ModelSpec.without_windows`).
    False: each window layer keeps and reads at most its window of a sequence, as vLLM and SGLang do."""
    window_memory_whole: bool = False
    """The engine gives the window layers' caches as much memory as the full layers' but reads only within each
    window (TensorRT-LLM 1.x: a pool for each window size, each an identical share of the memory, its blocks
    written linearly up to the longest sequence): sequences fit as without windows (`kv_sequences`), a step
    reads as with them."""
    attention_dp: bool = False
    """Attention data parallel (a mixture of experts over TP GPUs): each GPU runs the attention of its own
    share of the sequences with every head and a whole copy of the weights outside the routed experts, which
    stay split over the GPUs (TensorRT-LLM's ``enable_attention_dp``, SGLang's ``--enable-dp-attention``)."""

    def __post_init__(self) -> None:
        if self.full_window_cache and self.model.window_layers:  # frozen: set once, here
            object.__setattr__(self, "model", self.model.without_windows())
        if self.tp < 1 or self.pp < 1:
            raise ConfigError(f"tensor and pipeline parallel sizes must be at least 1 (got {self.tp}, {self.pp})")
        if self.expert_parallel and not self.model.is_moe:
            raise ConfigError(f"--ep: {self.model.name} is not a mixture of experts; leave --ep out")
        if self.attention_dp and not self.model.is_moe:
            raise ConfigError(f"--attention-dp: {self.model.name} is not a mixture of experts; leave "
                              "--attention-dp out")
        if self.expert_parallel and self.model.experts % self.tp:
            raise ConfigError(f"--ep: {self.model.name}'s {self.model.experts} experts do not split evenly over "
                              f"--tp {self.tp} GPUs")
        problem = self.model.tp_problem(self.tp)
        if problem:
            raise ConfigError(f"--tp {self.tp}: {problem}")
        if self.pp > self.model.layers:
            raise ConfigError(f"--pp {self.pp}: {self.model.name} has {self.model.layers} layers, so at most "
                              f"{self.model.layers} pipeline stages")
        weight_dtype(self.weight_dtype)
        kv_bytes(self.kv_dtype)
        problem = kv_format_problem(self.kv_dtype, self.hardware)
        if problem:
            raise ConfigError(f"a KV cache in {self.kv_dtype}: {problem}: use an fp8 one (--kv-dtype fp8)")

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    @cached_property
    def weight_bytes(self) -> float:
        """All weights, in bytes."""
        return self.model.weight_bytes_for(self.weight_dtype)

    @cached_property
    def _weight_bytes_split(self) -> tuple[float, float]:
        return self.model.weight_bytes_split(self.weight_dtype)

    @property
    def other_weight_bytes(self) -> float:
        """Weights outside the routed experts (all of them for a dense model), in bytes: read every step."""
        return self.weight_bytes - self.expert_weight_bytes

    @property
    def expert_weight_bytes(self) -> float:
        """The routed experts' weights in their format (`ModelSpec.expert_format`), in bytes (0: dense)."""
        return self._weight_bytes_split[1] if self.model.is_moe else 0.0

    @property
    def weight_format(self) -> str:
        """The weights' format in words: ``bf16``, or ``bf16, experts mxfp4`` when the experts have their own."""
        experts = self.model.expert_format(self.weight_dtype) if self.model.is_moe else ""
        key = normalize_dtype(self.weight_dtype)
        return f"{key}, experts {experts}" if experts and experts != key else key

    @property
    def ranks(self) -> int:
        """Engine ranks that each schedule their own sequences: TP with attention data parallel, else 1."""
        return self.tp if self.attention_dp else 1

    @cached_property
    def weight_bytes_per_gpu(self) -> float:
        """W / (TP × PP); with attention data parallel (W_other + W_experts / TP) / PP: the rest is copied."""
        if self.attention_dp:
            return (self.other_weight_bytes + self.expert_weight_bytes / self.tp) / self.pp
        return self.weight_bytes / self.gpus

    @cached_property
    def kv_element_bytes(self) -> float:
        return kv_bytes(self.kv_dtype)

    @cached_property
    def kv_bytes_per_token(self) -> float:
        """KV-cache bytes one token adds, whole model, in the layers whose cache grows with the context
        (`ModelSpec.kv_layers`): 2 × L × h_kv × d × b (MLA: L × (rank + RoPE dim) × b), and a sparse
        attention's indexer keys (`ModelSpec.indexer_bytes_per_token`, fp8 whatever the cache's format)."""
        return self.model.kv_elements_per_token * self.kv_element_bytes + self.model.indexer_bytes_per_token

    def _kv_per_layer_per_gpu(self) -> float:
        m = self.model
        if m.is_mla:
            return (m.kv_lora_rank + m.qk_rope_head_dim) * self.kv_element_bytes / self.ranks
        if self.attention_dp:  # every head of 1/TP of the sequences: no head is copied
            return 2 * m.kv_heads * m.head_dim * self.kv_element_bytes / self.tp
        return 2 * math.ceil(m.kv_heads / self.tp) * m.head_dim * self.kv_element_bytes

    def _indexer_per_layer_per_gpu(self) -> float:
        """Indexer-key bytes one token takes in one indexer layer on one GPU (whole on every TP rank, as the
        latent cache; each rank its own sequences' with attention data parallel); 0 for dense attention."""
        return self.model.indexer_key_bytes / self.ranks

    @cached_property
    def kv_bytes_per_token_per_gpu(self) -> float:
        """KV-cache bytes one token takes on one GPU: 2 × ⌈L / PP⌉ × ⌈h_kv / TP⌉ × d × b (L: `ModelSpec.kv_layers`),
        and a sparse attention's indexer keys over its ⌈indexer layers / PP⌉."""
        return (math.ceil(self.model.kv_layers / self.pp) * self._kv_per_layer_per_gpu()
                + math.ceil(self.model.indexer_layer_count / self.pp) * self._indexer_per_layer_per_gpu())

    @cached_property
    def kv_read_bytes_per_token(self) -> float:
        """KV bytes per cached token read along a token's path when every cached token is read (all KV layers, one
        TP rank's heads, and any indexer keys; sparse attention reads fewer past its top-k: `kv_read_bytes`)."""
        return (self.model.kv_layers * self._kv_per_layer_per_gpu()
                + self.model.indexer_layer_count * self._indexer_per_layer_per_gpu())

    def kv_read_bytes(self, sequences: float, context_tokens: float) -> float:
        """KV bytes one GPU reads in a step for ``sequences`` holding ``context_tokens`` cached in all: one TP rank's
        heads of every layer-token attended, window layers at most their window a sequence, sparse attention at
        most its top-k (`ModelSpec.attended_tokens`), the indexer's keys of every cached token
        (`ModelSpec.indexer_tokens`), and each sequence's recurrent state, read and written back."""
        m = self.model
        return (m.attended_tokens(sequences, context_tokens) * self._kv_per_layer_per_gpu()
                + m.indexer_tokens(context_tokens) * self._indexer_per_layer_per_gpu()
                + 2 * max(0.0, sequences) * m.recurrent_layers * self._recurrent_state_per_gpu())

    def _recurrent_state_per_gpu(self) -> float:
        """Recurrent-state bytes one sequence keeps in one linear-attention or state-space layer on one GPU: its heads
        split over TP (with attention data parallel each rank keeps its own sequences' whole: the same on average)."""
        return self.model.recurrent_state_bytes / self.tp

    @cached_property
    def compute_dtype(self) -> str:
        """The data type this weight format multiplies in on this hardware (`tokometer.perf.quant`)."""
        return self.hardware.multiplies_in(weight_dtype(self.weight_dtype))

    @cached_property
    def compute_peak(self) -> ComputePeak | None:
        """One GPU's peak for this weight format, with how it is known (None: the hardware has no compute figure)."""
        return self.hardware.compute_peak(self.compute_dtype)

    @cached_property
    def dequantised_to(self) -> str | None:
        """The data type the weights are dequantised to and multiply in where the hardware has no peak for their
        format's own (nvfp4 on an MI355X or an H100: bf16; fp8 on an A100: bf16); None where they multiply in
        it, or the hardware has no compute figure (a CPU's own types are its own)."""
        peak, own = self.compute_peak, weight_dtype(self.weight_dtype).compute
        if peak is None or self.hardware.peaks or peak.dtype == own:
            return None
        return peak.dtype

    @cached_property
    def compute_flops(self) -> float | None:
        """One GPU's peak FLOP/s for this weight format (None: the hardware has no compute figure); experts in a
        format of their own at its peak, blended (`tokometer.perf.mixedformat`)."""
        from tokometer.perf.mixedformat import blended_flops

        peak = self.compute_peak
        return blended_flops(self.model, self.weight_dtype, self.hardware, self.compute_dtype, peak.flops) \
            if peak else None

    @property
    def compute_scale(self) -> float:
        """How the typical compute efficiencies carry over to this hardware: its sustained share of the datasheet
        peak in a dense GEMM over the fit split's GPUs' (`FIT_GEMM_FRACTION`), where its row gives one
        (GB200: 0.549 / 0.693 = 0.79); 1 where it does not. The bound (100 % of the datasheet) is not scaled."""
        fraction = self.hardware.gemm_fraction
        return fraction / FIT_GEMM_FRACTION if fraction else 1.0

    @cached_property
    def attention_compute_dtype(self) -> str:
        """The data type the attention (queries × cached keys and values) multiplies in: the weights' own on a
        CPU or when they multiply in 16 bits; with 8- or 4-bit weights on a GPU, fp8 when the KV cache is fp8 or
        nvfp4 (dequantised to fp8 in the attention kernels) and the hardware lists an fp8 peak, else bf16 (the
        engines' attention kernels take no 4-bit operands)."""
        compute = self.compute_dtype
        if self.hardware.kind == "cpu" or compute not in ("fp8", "fp4", "int8"):
            return compute
        fp8 = self.hardware.compute_peak("fp8")
        if normalize_dtype(self.kv_dtype) in ("fp8", "nvfp4") and fp8 is not None and fp8.dtype == "fp8":
            return "fp8"
        return "bf16"

    @cached_property
    def attention_flops(self) -> float | None:
        """One GPU's peak FLOP/s for the attention (`attention_compute_dtype`); None: no figure for it."""
        peak = self.hardware.compute_peak(self.attention_compute_dtype)
        return peak.flops if peak else None

    def usable_memory_bytes(self, gpu_memory_utilization: float = 0.9) -> int:
        """One GPU's memory × the share the engine may take (vLLM's ``--gpu-memory-utilization``)."""
        memory = self.hardware.memory_bytes
        if memory is None:
            raise ConfigError(f"{self.hardware.name} has no memory size: add memory_gb in the hardware file")
        return int(memory * gpu_memory_utilization)

    def kv_memory_share(self, gpu_memory_utilization: float, free_share: float | None = None) -> float:
        """The share of the whole memory for weights and KV cache: ``gpu_memory_utilization`` (vLLM's rule), or with
        ``free_share`` the equivalent of TensorRT-LLM's rule (`utilization_for_free_share`)."""
        return gpu_memory_utilization if free_share is None else self.utilization_for_free_share(free_share)

    def utilization_for_free_share(self, share: float, reserve_gib: float = ACTIVATION_RESERVE_GIB) -> float:
        """The ``gpu_memory_utilization`` (a share of the whole memory, vLLM's rule) that gives the KV cache ``share``
        of the memory left free after the weights and the activation reserve, as TensorRT-LLM sizes it (its
        ``kv_cache_free_gpu_mem_fraction``): (share × (M − W − R) + W + R) / M, at most 1 (weights that do not fit
        leave no room either way)."""
        if not 0 < share <= 1:
            raise ConfigError(f"the KV cache's share of the free memory must be in (0, 1] (got {share})")
        memory = self.usable_memory_bytes(1.0)
        taken = self.weight_bytes_per_gpu + reserve_gib * GIB
        return min(1.0, (share * (memory - taken) + taken) / memory)

    def kv_budget_bytes(self, gpu_memory_utilization: float = 0.9, reserve_gib: float = ACTIVATION_RESERVE_GIB) -> int:
        """KV-cache bytes per GPU: usable memory − weights per GPU − the activation reserve (negative: no room)."""
        return (self.usable_memory_bytes(gpu_memory_utilization) - int(self.weight_bytes_per_gpu)
                - int(reserve_gib * GIB))

    @cached_property
    def _memory(self) -> Deployment:
        """This deployment as its memory is planned: without windows where `window_memory_whole`, else itself."""
        if not (self.window_memory_whole and self.model.window_layers):
            return self
        return replace(self, full_window_cache=True, window_memory_whole=False)

    def kv_capacity_tokens(self, gpu_memory_utilization: float = 0.9,
                           reserve_gib: float = ACTIVATION_RESERVE_GIB) -> int:
        """Tokens of KV cache that fit beside the weights in the layers whose cache grows with the context (0
        when the weights alone do not fit); a model with window layers holds fewer: `kv_sequences`."""
        budget = self.kv_budget_bytes(gpu_memory_utilization, reserve_gib)
        return max(0, int(budget // self._memory.kv_bytes_per_token_per_gpu))

    def kv_bytes_per_sequence(self, tokens: float) -> float:
        """KV-cache bytes a sequence holding ``tokens`` takes, whole model: its full layers' per token × t and its
        window layers' at most their window (`ModelSpec.cached_layer_tokens`), any indexer keys, and any recurrent
        state (`ModelSpec.recurrent_bytes_per_sequence`, whatever ``tokens``)."""
        m = self._memory.model
        return (m.cached_layer_tokens(tokens) * m.kv_elements_per_layer * self.kv_element_bytes
                + tokens * m.indexer_bytes_per_token + m.recurrent_bytes_per_sequence)

    def kv_bytes_per_sequence_per_gpu(self, tokens: float) -> float:
        """KV-cache bytes a sequence holding ``tokens`` takes on one GPU: each kind of layer split over the PP
        stages (the busiest stage), its heads over TP (`kv_bytes_per_token_per_gpu` for the full layers); a recurrent
        layer's state likewise."""
        if self._memory is not self:
            return self._memory.kv_bytes_per_sequence_per_gpu(tokens)
        m = self.model
        window = math.ceil(m.window_layers / self.pp) * self._kv_per_layer_per_gpu() * min(tokens, m.sliding_window)
        state = math.ceil(m.recurrent_layers / self.pp) * self._recurrent_state_per_gpu()
        return self.kv_bytes_per_token_per_gpu * tokens + window + state

    def kv_sequences(self, tokens: int, gpu_memory_utilization: float = 0.9,
                     reserve_gib: float = ACTIVATION_RESERVE_GIB) -> int:
        """Sequences of ``tokens`` tokens each whose caches fit beside the weights at once (0: not one)."""
        budget = self.kv_budget_bytes(gpu_memory_utilization, reserve_gib)
        return max(0, int(budget // self.kv_bytes_per_sequence_per_gpu(max(1, tokens))))

    @property
    def expert_gemm_width(self) -> float:
        """The width (intermediate size) at which the routed experts' grouped GEMM is counted
        (`Efficiency.expert_share`): the expert's whole width, whole experts on each GPU (``expert_parallel``) or
        each split TP ways (the default). A split expert gives each GPU fewer tiles of the same depth (its gate
        and up projections still run over the whole hidden size), not narrower ones: counted at 1/TP of the width
        until 2026-12-06, a mixture of experts over 8 H200s at 8-64 users ran 3.4-4.5 × faster than that
        (`tokometer.perf.published`: InferenceX's DeepSeek R1, SGLang, TP 8; held out, typed in after seen)."""
        return float(self.model.routed_expert_width)

    def describe(self) -> str:
        parallel = f", TP {self.tp}" if self.tp > 1 else ""
        parallel += f", PP {self.pp}" if self.pp > 1 else ""
        parallel += f", EP {self.tp}" if self.expert_parallel else ""
        parallel += f", attention DP {self.tp}" if self.attention_dp and self.tp > 1 else ""
        parallel += ", window layers' caches whole" if self.full_window_cache else ""
        parallel += ", window layers planned whole, read within" if self._memory is not self else ""
        return (f"{self.model.name} {self.weight_format} (KV {self.kv_dtype}) on "
                f"{self.gpus} × {self.hardware.name}{parallel}")


def decode_flops(m: ModelSpec, batch: float, context_tokens: float) -> float:
    """FLOPs of one decode step: 2 × M × batch + attention FLOPs per layer-pair × attended layer-tokens (every
    layer's context, a window layer's at most its window a sequence: `ModelSpec.attended_tokens`; a sparse
    attention's indexer too: `ModelSpec.attention_flops`)."""
    return 2 * m.matmul_params * batch + m.attention_flops(batch, context_tokens)


def prefill_flops(m: ModelSpec, tokens: float, context_tokens: float = 0, sequences: float = 1) -> float:
    """FLOPs of a prefill of ``tokens`` split over ``sequences`` each with its share of ``context_tokens``:
    2 × (M − V·h) × T + 2 × V·h × sequences + attention FLOPs per pair × Σ (t × c + t (t + 1) / 2)."""
    return sum(prefill_flops_split(m, tokens, context_tokens, sequences))


def prefill_flops_split(m: ModelSpec, tokens: float, context_tokens: float = 0, sequences: float = 1
                        ) -> tuple[float, float]:
    """(matmul FLOPs, attention FLOPs) of a prefill (`prefill_flops`): they run at different peaks. ``sequences``
    may be a fraction: a step's share of prompts prefilled over many steps (`ModelSpec.attended_pairs`)."""
    n = sequences if sequences > 0 else 1.0
    body = m.matmul_params - m.lm_head_params
    # causal; a window layer's keys capped at its window, a sparse one's at its top-k (plus its indexer)
    return 2 * body * tokens + 2 * m.lm_head_params * n, m.prefill_attention_flops(n, tokens, context_tokens)


def weight_bytes_read(d: Deployment, tokens: int) -> float:
    """Weight bytes a step over ``tokens`` tokens reads: all (dense), or the rest + touched experts (MoE):
    W_other + W_experts × (1 − (1 − k/E)^tokens); with expert parallelism TP × the busiest GPU's share
    of the experts' bytes instead (module docstring), so that / TP is always one GPU's critical path."""
    m = d.model
    if not m.is_moe:
        return d.weight_bytes
    other = d.other_weight_bytes * d.ranks  # attention data parallel: every GPU reads all of them
    if d.expert_parallel and d.tp > 1:
        return other + d.tp * m.busiest_gpu_experts(tokens, d.tp) * d.expert_weight_bytes / m.experts
    return other + d.expert_weight_bytes * m.expert_fraction_read(tokens)


def matmul_bytes(d: Deployment, tokens: float) -> float:
    """Bytes one GPU's matmuls move in a step over ``tokens`` tokens: the weights they touch (/ TP) and the
    activations they read and write (`ModelSpec.activation_elements_per_token` × 2 B × tokens / TP)."""
    activations = d.model.activation_elements_per_token * ACTIVATION_BYTES * tokens / d.tp
    return weight_bytes_read(d, max(1, round(tokens))) / d.tp + activations


def _memory_s(d: Deployment, tokens: float, kv_bytes: float, eff: Efficiency) -> float:
    """Moving the matmuls' bytes of a step over ``tokens`` tokens (`matmul_bytes`) and ``kv_bytes`` of KV cache."""
    return (matmul_bytes(d, tokens) + kv_bytes) / (d.hardware.bandwidth * eff.decode_bandwidth)


def pipeline_microbatch(d: Deployment, batch: int) -> int:
    """The sequences of one microbatch when ``batch`` decode over PP pipeline stages: ⌈batch / PP⌉ (``batch``
    itself without pipeline parallelism, or for a single sequence). The engines (TensorRT-LLM, vLLM, SGLang)
    keep PP microbatches in flight, one on each stage, so a stage runs its layers for one microbatch while
    the others run theirs: each token still passes every stage (its step is the whole model's, at the
    microbatch), and PP microbatches advance at once (`mixed_step_s`)."""
    return math.ceil(batch / d.pp) if d.pp > 1 and batch > 1 else batch


def pipeline_share(d: Deployment, batch: int) -> float:
    """The microbatch's share of a step of ``batch`` sequences (`pipeline_microbatch` / ``batch``): the share of
    the step's cached tokens, prompt tokens and prompts one microbatch carries; 1 without pipeline parallelism."""
    return pipeline_microbatch(d, batch) / batch if batch > 1 else 1.0


def mixed_step_s(d: Deployment, batch: int, context_tokens: float, prefill_tokens: float = 0,
                 prefill_context: float = 0, efficiency: Efficiency | None = None, *, sequences: float = 1) -> float:
    """The time between a decoding sequence's tokens: `_group_step_s` of the whole model at the batch, or with
    pipeline parallelism at its microbatch (`pipeline_microbatch`), its share of the step's context, prompt
    tokens and prompts with it. With PP stages and B sequences the engine keeps PP microbatches of B / PP in
    flight, one on each stage; each stage runs its L / PP layers for one of them in about 1 / PP of the whole
    model's step at B / PP, so a microbatch passes all stages, one token for each of its sequences, in the whole
    model's step at B / PP, while PP microbatches advance at once: the aggregate is B over that step, PP times
    one stage group's at B / PP (the bubbles, the stages' unequal first and last layers and the hand-off
    between stages are not counted). With fewer sequences than stages each is a microbatch of its own and the
    step is the whole model's at batch 1: pipeline stages split the memory, not a token's latency."""
    share = pipeline_share(d, batch)
    if share == 1:
        return _group_step_s(d, batch, context_tokens, prefill_tokens, prefill_context, efficiency,
                             sequences=sequences)
    return _group_step_s(d, pipeline_microbatch(d, batch), context_tokens * share, prefill_tokens * share,
                         prefill_context, efficiency, sequences=sequences * share)


def _group_step_s(d: Deployment, batch: int, context_tokens: float, prefill_tokens: float = 0,
                  prefill_context: float = 0, efficiency: Efficiency | None = None, *, sequences: float = 1) -> float:
    """One iteration of the whole model on one TP group that decodes a token for each of ``batch`` sequences
    holding ``context_tokens`` and, in the same step (chunked prefill), prefills ``prefill_tokens`` prompt
    tokens over ``sequences`` prompts with ``prefill_context`` tokens of theirs already cached, plus the step's
    tensor-/expert-parallel communication over all its tokens (`tokometer.perf.collective`):

    matmuls         max(W_read(B + P) / TP / (BW × e_bw), 2 × M × B / (TP × F × e_decode))
    + attention     max(KV × (C_decode + C_prefill + P) / (BW × e_bw), attention FLOPs(C_decode) / (TP × F × e_decode))
    + prefill FLOPs / (TP × F × e_prefill) + communication(B + P) + L × e_layer

    The weights are read once for all the step's tokens; the matmuls and the attention run one after the
    other in each layer, so a compute-bound matmul does not hide the attention's KV read (`_decode_parts`);
    the prompt tokens' FLOPs are added rather than hidden under the memory time, as the decode's attention
    kernels (bound by their KV reads) and the prompt's matmuls (bound by FLOPs) also run one after the other;
    and each layer costs a fixed ``Efficiency.layer_overhead_s`` (0 in the bound). The published figures
    `tokometer.perf.maxload` is checked against fit these sums (`tokometer.perf.published`). With no sequence
    decoding (``batch`` 0) the step is the prefill's own roofline, compute bound with the weight read as a
    floor (`prefill_s`).
    """
    eff = efficiency or BOUND
    tokens = batch + prefill_tokens
    if tokens <= 0:
        return 0.0
    kv = d.kv_read_bytes(batch, context_tokens) + (
        d.kv_read_bytes(sequences, prefill_context + prefill_tokens) if prefill_tokens else 0.0)
    memory = _memory_s(d, tokens, kv, eff)
    flops = d.compute_flops
    if not flops:
        return memory + communication_s(d, tokens) + step_overhead_s(d, eff)
    prefill = 0.0
    if prefill_tokens:
        matmul, attention = prefill_flops_split(d.model, prefill_tokens, prefill_context, sequences)
        matmul += expert_extra_flops(d, tokens, eff) * prefill_tokens / tokens
        prefill = (matmul / flops + attention / (d.attention_flops or flops)) / (
            d.tp * eff.prefill_compute * _scale(d, eff))
    if batch <= 0:
        return max(memory, prefill) + communication_s(d, tokens) + step_overhead_s(d, eff)
    return (_decode_kernels_s(d, batch, tokens, kv, context_tokens, eff) + prefill + communication_s(d, tokens)
            + step_overhead_s(d, eff))


def expert_extra_flops(d: Deployment, tokens: float, eff: Efficiency) -> float:
    """FLOPs a step over ``tokens`` tokens adds to the dense count of its routed experts' matmuls (2 × M_e per
    token, M_e = one token's k experts' parameters), as dense-efficiency FLOPs: the grouped GEMM's rows padded
    to its tile (`tokometer.perf.groupedgemm`) at `Efficiency.expert_share` of the dense efficiency for the
    width each GPU multiplies (`Deployment.expert_gemm_width`). 0 for a dense model, an empty step, or in the
    bound (`BOUND`: no kernel's padding)."""
    m = d.model
    if not m.is_moe or tokens <= 0 or eff == BOUND:
        return 0.0
    per_expert = m.expert_params / m.experts
    padded = padded_expert_rows(tokens, m.experts, m.experts_per_token)
    return 2 * per_expert * (padded / eff.expert_share(d.expert_gemm_width) - m.experts_per_token * tokens)


def _scale(d: Deployment, eff: Efficiency) -> float:
    """`Deployment.compute_scale` for an expected time; 1 in the bound."""
    return 1.0 if eff == BOUND else d.compute_scale


def step_overhead_s(d: Deployment, efficiency: Efficiency | None = None) -> float:
    """The fixed cost of one engine step whatever its size: `Efficiency.layer_overhead_s` for each layer (the
    launch and tail of its kernels, the barriers between them), once per step (0 in the bound)."""
    return d.model.layers * (efficiency or BOUND).layer_overhead_s


def _decode_kernels_s(d: Deployment, batch: int, tokens: float, kv_bytes: float, context_tokens: float,
                      eff: Efficiency) -> float:
    """The decode part of a step: its bandwidth-bound and compute-bound kernel time together (`_decode_parts`)."""
    return sum(_decode_parts(d, batch, tokens, kv_bytes, context_tokens, eff))


def _decode_parts(d: Deployment, batch: int, tokens: float, kv_bytes: float, context_tokens: float,
                  eff: Efficiency) -> tuple[float, float]:
    """(bandwidth-bound, compute-bound) seconds of the decode part of a step, as its two kinds of kernels run
    one after the other in every layer: the matmuls (the weights read once for the step's ``tokens``, or their
    FLOPs for the ``batch`` decoding: max) and then the attention (its read of ``kv_bytes`` of cache, or
    its FLOPs over ``context_tokens``: max). At a small batch both are bandwidth bound and their sum is the
    memory time; at a large one the matmuls turn compute bound while the attention stays bound by its KV
    read, which no longer hides under them."""
    flops = d.compute_flops
    bandwidth = d.hardware.bandwidth * eff.decode_bandwidth
    weights = matmul_bytes(d, tokens) / bandwidth
    cache = kv_bytes / bandwidth
    if not flops:
        return weights + cache, 0.0
    per_gpu = d.tp * flops * eff.decode_compute * _scale(d, eff)
    matmuls = (2 * d.model.matmul_params * batch + expert_extra_flops(d, tokens, eff) * batch / tokens) / per_gpu
    attention = d.model.attention_flops(batch, context_tokens) / (
        d.tp * (d.attention_flops or flops) * eff.decode_compute * _scale(d, eff))
    memory = (weights if weights >= matmuls else 0.0) + (cache if cache >= attention else 0.0)
    work = (matmuls if matmuls > weights else 0.0) + (attention if attention > cache else 0.0)
    return memory, work


def decode_step_s(d: Deployment, batch: int, context_tokens: float, efficiency: Efficiency | None = None) -> float:
    """Time of one decode iteration: one new token for each of ``batch`` sequences holding ``context_tokens``.

    max((W_read / TP + KV per token × context) / (BW × e_bw), decode FLOPs / (TP × F × e_decode))
    + communication(batch)
    """
    return mixed_step_s(d, batch, context_tokens, 0, 0, efficiency)


def decode_limiter(d: Deployment, batch: int, context_tokens: float, efficiency: Efficiency | None = None) -> str:
    """What bounds a decode step at ``efficiency``: ``compute`` when its compute-bound kernels take longer than its
    bandwidth-bound ones (`_decode_parts`), else ``bandwidth`` (the communication and the fixed per-layer cost,
    added to either, bound neither)."""
    micro = pipeline_microbatch(d, batch)  # pipeline parallel: the microbatch's step (`mixed_step_s`)
    context_tokens *= pipeline_share(d, batch)
    memory, work = _decode_parts(d, micro, micro, d.kv_read_bytes(micro, context_tokens), context_tokens,
                                 efficiency or BOUND)
    return "compute" if work > memory else "bandwidth"


def prefill_s(d: Deployment, tokens: int, context_tokens: int = 0, efficiency: Efficiency | None = None, *,
              sequences: int = 1) -> float:
    """Time to process ``tokens`` prompt tokens split evenly over ``sequences`` (each with its share of
    ``context_tokens`` already cached): compute bound, with the weight (and KV) read as a floor, plus the
    communication of ``tokens`` tokens.

    max(prefill FLOPs / (TP × F × e_prefill), (W_read / TP + KV per token × (C + T)) / (BW × e_bw))
    + communication(T)
    """
    if tokens <= 0:
        return 0.0
    return mixed_step_s(d, 0, 0, tokens, context_tokens, efficiency, sequences=sequences)


def embedding_pass_s(d: Deployment, inputs: int, tokens_each: int, efficiency: Efficiency | None = None) -> float:
    """Time of one embedding (or rerank) pass over ``inputs`` texts of ``tokens_each`` tokens: a prefill only
    (nothing is decoded), each input its own sequence with nothing cached: `prefill_s` of ``inputs ×
    tokens_each`` tokens over ``inputs`` sequences. The pooling and the output head are left out (a
    vector per input, against a prefill's many layers)."""
    return prefill_s(d, inputs * tokens_each, 0, efficiency, sequences=max(1, inputs))


def compute_bound_batch(d: Deployment, context_per_sequence: float, efficiency: Efficiency | None = None,
                        limit: int = 1 << 20) -> int | None:
    """The smallest batch whose decode step is compute bound (None: bandwidth bound up to ``limit``)."""
    eff = efficiency or BOUND
    flops = d.compute_flops
    if not flops:
        return None

    def compute_bound(b: int) -> bool:
        return decode_limiter(d, b, context_per_sequence * b, eff) == "compute"

    if not compute_bound(limit):
        return None
    low, high = 1, limit
    while low < high:
        mid = (low + high) // 2
        if compute_bound(mid):
            high = mid
        else:
            low = mid + 1
    return low
