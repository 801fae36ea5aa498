"""The names the families that do not name their modules Llama's way give a decoder layer's linear modules, and
each one's parameters from the config's shapes: what `tokometer.perf.unquantized` matches a checkpoint's list of
modules kept in 16 bits against, for these families, instead of Llama's spellings.

Each family (its ``model_type``) as its modelling code names them: transformers' for all but ChatGLM and Qwen 1,
whose names are those of their own remote code (``modeling_chatglm.py``, ``modeling_qwen.py``):

    family              layers under              attention                          MLP
    gpt2, gpt_bigcode   transformer.h             attn.c_attn (fused), attn.c_proj   mlp.c_fc, mlp.c_proj
    gptj                transformer.h             attn.q_proj, k_proj, v_proj,       mlp.fc_in, mlp.fc_out
                                                  out_proj
    gpt_neox            gpt_neox.layers           attention.query_key_value (fused), mlp.dense_h_to_4h,
                                                  attention.dense                    mlp.dense_4h_to_h
    falcon, bloom       transformer.h             self_attention.query_key_value     mlp.dense_h_to_4h,
                                                  (fused), self_attention.dense      mlp.dense_4h_to_h
    opt                 model.decoder.layers      self_attn.q_proj, k_proj, v_proj,  fc1, fc2
                                                  out_proj
    mpt                 transformer.blocks        attn.Wqkv (fused), attn.out_proj   ffn.up_proj, ffn.down_proj
    starcoder2          model.layers              self_attn.q_proj, k_proj, v_proj,  mlp.c_fc, mlp.c_proj
                                                  o_proj
    phi (Phi-2)         model.layers              self_attn.q_proj, k_proj, v_proj,  mlp.fc1, mlp.fc2
                                                  dense
    nemotron            model.layers              self_attn.q_proj, k_proj, v_proj,  mlp.up_proj, mlp.down_proj
                                                  o_proj
    chatglm             transformer.encoder       self_attention.query_key_value     mlp.dense_h_to_4h (gate and
                        .layers                   (fused), self_attention.dense      up fused), mlp.dense_4h_to_h
    qwen (Qwen 1)       transformer.h             attn.c_attn (fused), attn.c_proj   mlp.w1, mlp.w2 (the gated
                                                                                     halves), mlp.c_proj
    phi3 (Phi-3, Phi-4) model.layers              self_attn.qkv_proj (fused),        mlp.gate_up_proj (gate and
                                                  self_attn.o_proj                   up fused), mlp.down_proj
    glm, glm4           model.layers              self_attn.q_proj, k_proj, v_proj,  mlp.gate_up_proj (gate and
                                                  o_proj                             up fused), mlp.down_proj

A fused q, k, v projection holds hidden × (heads + 2 × KV heads) × head dim parameters (Falcon's and StarCoder's
multi-query one, ChatGLM's and Phi-3's grouped ones, as the config's KV heads say), the output projection heads ×
head dim × hidden; each MLP matrix hidden × the MLP's width, ChatGLM's, Phi-3's and GLM-4's fused gate and up
projection twice that. A layer's modules thus hold what the parameter count gives it (`tokometer.perf.loaders`:
attention, and `tokometer.perf.configdialects.mlp_matrices` matrices of hidden × width), so that a list keeping
every one keeps exactly the layers' linear parameters. These families have no experts here (DBRX, whose experts are
fused parameters of ``ffn.experts.mlp``, is not among them).

ChatGLM's first release (ChatGLM-6B, ``transformer.layers.N.attention``) is not told apart from ChatGLM2 and 3 by
its ``model_type`` and is named as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["FAMILY_NAMES", "LayerNames", "layer_names"]


@dataclass(frozen=True)
class LayerNames:
    """How a family names a decoder layer's linear modules, below ``root``.N."""

    root: str
    """The layers' module list: ``transformer.h`` (its layer N is ``transformer.h.N``)."""
    attention: tuple[str, ...]
    """The attention's projections: q, k, v and the output one, or a fused q, k, v one and the output one."""
    mlp: tuple[tuple[str, int], ...]
    """Each MLP matrix's name and how many hidden × width matrices it holds (2: a gate and up projection fused)."""

    def attention_sizes(self, hidden: int, heads: int, kv_heads: int, head_dim: int) -> list[tuple[str, int]]:
        """Each attention projection's name and parameters (module docstring)."""
        q, kv, out = hidden * heads * head_dim, hidden * kv_heads * head_dim, heads * head_dim * hidden
        sizes = (q, kv, kv, out) if len(self.attention) == 4 else (q + 2 * kv, out)
        return list(zip(self.attention, sizes, strict=True))

    @property
    def shown(self) -> str:
        """A few of the names, as a message gives them: ``gpt_neox.layers.N.attention.query_key_value, .mlp...``."""
        return f"{self.root}.N.{self.attention[0]}, .{self.mlp[0][0]}, ..."

    def mlp_sizes(self, hidden: int, width: int) -> list[tuple[str, int]]:
        """Each MLP matrix's name and parameters, for an MLP ``width`` wide."""
        return [(name, parts * hidden * width) for name, parts in self.mlp]


_ATTN_FUSED = ("attn.c_attn", "attn.c_proj")
_SELF_ATTENTION = ("self_attention.query_key_value", "self_attention.dense")
_SELF_ATTN = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")
_DENSE_4H = (("mlp.dense_h_to_4h", 1), ("mlp.dense_4h_to_h", 1))
_C_FC = (("mlp.c_fc", 1), ("mlp.c_proj", 1))
_GATE_UP = (("mlp.gate_up_proj", 2), ("mlp.down_proj", 1))

FAMILY_NAMES: dict[str, LayerNames] = {
    "gpt2": LayerNames("transformer.h", _ATTN_FUSED, _C_FC),
    "gpt_bigcode": LayerNames("transformer.h", _ATTN_FUSED, _C_FC),
    "gptj": LayerNames("transformer.h", ("attn.q_proj", "attn.k_proj", "attn.v_proj", "attn.out_proj"),
                       (("mlp.fc_in", 1), ("mlp.fc_out", 1))),
    "gpt_neox": LayerNames("gpt_neox.layers", ("attention.query_key_value", "attention.dense"), _DENSE_4H),
    "falcon": LayerNames("transformer.h", _SELF_ATTENTION, _DENSE_4H),
    "bloom": LayerNames("transformer.h", _SELF_ATTENTION, _DENSE_4H),
    "opt": LayerNames("model.decoder.layers", (*_SELF_ATTN, "self_attn.out_proj"), (("fc1", 1), ("fc2", 1))),
    "mpt": LayerNames("transformer.blocks", ("attn.Wqkv", "attn.out_proj"),
                      (("ffn.up_proj", 1), ("ffn.down_proj", 1))),
    "starcoder2": LayerNames("model.layers", (*_SELF_ATTN, "self_attn.o_proj"), _C_FC),
    "phi": LayerNames("model.layers", (*_SELF_ATTN, "self_attn.dense"), (("mlp.fc1", 1), ("mlp.fc2", 1))),
    "nemotron": LayerNames("model.layers", (*_SELF_ATTN, "self_attn.o_proj"),
                           (("mlp.up_proj", 1), ("mlp.down_proj", 1))),
    "chatglm": LayerNames("transformer.encoder.layers", _SELF_ATTENTION,
                          (("mlp.dense_h_to_4h", 2), ("mlp.dense_4h_to_h", 1))),
    "qwen": LayerNames("transformer.h", _ATTN_FUSED, (("mlp.w1", 1), ("mlp.w2", 1), ("mlp.c_proj", 1))),
    "phi3": LayerNames("model.layers", ("self_attn.qkv_proj", "self_attn.o_proj"), _GATE_UP),
    "glm": LayerNames("model.layers", (*_SELF_ATTN, "self_attn.o_proj"), _GATE_UP),
    "glm4": LayerNames("model.layers", (*_SELF_ATTN, "self_attn.o_proj"), _GATE_UP),
}
"""Each family's names, by ``model_type`` (module docstring)."""


def layer_names(cfg: dict[str, Any]) -> LayerNames | None:
    """How the model's family names its layers' linear modules (`FAMILY_NAMES`, by its ``model_type``); None for
    a family that names them Llama's way, or one not known here."""
    kind = cfg.get("model_type")
    return FAMILY_NAMES.get(kind.lower()) if isinstance(kind, str) else None
