"""The policy's architecture as one typed config, from the 1M-parameter debug model to the full 2.8T preset."""
from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

LayerKind = Literal["K", "S", "L"]
LAYER_KIND_NAMES = {"K": "kda", "S": "gated_dsa", "L": "gated_mla"}
_PATTERN_PART = re.compile(r"^([KSL]+)(?:\*(\d+))?$")


def expand_layer_pattern(pattern: str) -> str:
    """Expand a shorthand like ``"KKKS*23+S"`` into one letter per layer."""
    compact = pattern.replace(" ", "")
    if not compact:
        raise ValueError("layer_pattern is empty")
    out = []
    for part in compact.split("+"):
        match = _PATTERN_PART.match(part)
        if match is None:
            raise ValueError(
                f"layer_pattern part {part!r} is not UNIT or UNIT*N with UNIT made of K (delta attention), "
                "S (gated sparse attention), L (gated latent attention)"
            )
        out.append(match.group(1) * int(match.group(2) or 1))
    return "".join(out)


class ModelConfig(BaseModel):
    """Every dimension of the policy; one instance builds the same architecture at any scale."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    name: str = Field("custom", description="Preset name, for logs and checkpoints.")
    vocab_size: int = Field(..., gt=0, description="Tokenizer vocabulary size (embedding and head rows).")
    dim: int = Field(..., gt=0, description="Hidden size of the residual stream.")
    layer_pattern: str = Field(
        ...,
        description="One letter per layer: K = gated delta attention (KDA), S = gated dynamic sparse attention "
        "(DSA), L = gated latent attention (MLA). Shorthand 'KKKS*23+S' repeats a unit.",
    )
    first_dense_layers: int = Field(1, ge=0, description="The first k layers use a dense SwiGLU FFN instead of MoE.")
    dense_hidden: int = Field(..., gt=0, description="Intermediate width of the dense SwiGLU FFN layers.")
    norm_eps: float = Field(1e-6, gt=0, description="RMSNorm epsilon.")
    tie_embeddings: bool = Field(False, description="Share the input embedding with the output head.")
    max_seq_len: int = Field(4096, gt=0, description="Longest sequence (prompt + generation) the model serves.")
    init_std: float = Field(0.02, gt=0, description="Std of the normal init of linear and embedding weights.")

    # Gated delta attention (KDA).
    kda_heads: int = Field(..., gt=0, description="KDA heads.")
    kda_head_dim: int = Field(..., gt=0, description="KDA key and value dim per head.")
    kda_conv_size: int = Field(4, gt=0, description="Kernel size of the depthwise causal short conv on q, k, v.")
    kda_gate_rank: int = Field(..., gt=0, description="Rank of the low-rank decay-gate and output-gate projections.")
    kda_chunk_size: int = Field(64, gt=0, description="Chunk length of the chunkwise (training / prefill) form.")

    # Gated latent attention (MLA), also the attention inside DSA layers.
    attn_heads: int = Field(..., gt=0, description="Latent-attention query heads.")
    q_lora_rank: int = Field(..., ge=0, description="Query low-rank bottleneck; 0 projects queries directly.")
    kv_lora_rank: int = Field(..., gt=0, description="Width of the compressed KV latent that is cached.")
    qk_nope_dim: int = Field(..., gt=0, description="Per-head query/key dims without rotary embedding.")
    qk_rope_dim: int = Field(..., ge=0, description="Per-head decoupled rotary dims (shared key); 0 = NoPE.")
    v_head_dim: int = Field(..., gt=0, description="Per-head value dim.")
    rope_theta: float = Field(10000.0, gt=0, description="Rotary base frequency.")
    mla_rope: bool = Field(
        True,
        description="Rotate the qk_rope_dim query and shared-key dims; False leaves them unrotated (Kimi Linear's "
        "NoPE latent attention keeps the dims but never rotates them).",
    )
    latent_norm_eps: float | None = Field(
        None,
        gt=0,
        description="Epsilon of the norms inside latent attention (query and KV latent RMSNorms, indexer key "
        "LayerNorm); None = norm_eps. DeepSeek's and Kimi's reference code fix it at 1e-6 whatever norm_eps is.",
    )
    attn_output_gate: bool = Field(True, description="Elementwise sigmoid gate per head before the output projection.")

    # Lightning indexer (DSA layers).
    index_heads: int = Field(4, gt=0, description="Indexer heads (ReLU scores, weighted per head).")
    index_head_dim: int = Field(32, gt=0, description="Indexer query/key dim; one shared index key per token.")
    index_rope_dim: int = Field(16, ge=0, description="Leading indexer dims that get (non-interleaved) rotary.")
    index_topk: int = Field(2048, gt=0, description="Past tokens each query attends to in DSA layers.")

    # Mixture of experts.
    n_experts: int = Field(..., gt=0, description="Routed experts per MoE layer.")
    n_active: int = Field(..., gt=0, description="Routed experts chosen per token (top-k).")
    n_shared: int = Field(1, ge=0, description="Shared experts, always active (one SwiGLU of n_shared x width).")
    expert_hidden: int = Field(..., gt=0, description="Intermediate width of each routed expert.")
    router_scoring: Literal["sigmoid", "softmax"] = Field("sigmoid", description="Router affinity function.")
    route_scale: float = Field(1.0, gt=0, description="Scaling factor applied to the normalised top-k weights.")
    norm_topk_prob: bool = Field(True, description="Normalise the chosen experts' weights to sum to 1.")
    n_groups: int = Field(1, gt=0, description="Expert groups for group-limited routing (1 = off).")
    topk_groups: int = Field(1, gt=0, description="Groups a token may route into.")
    router_bias_rate: float = Field(1e-3, ge=0, description="Step of the aux-loss-free balancing bias update.")
    seq_aux_loss_coef: float = Field(0.0, ge=0, description="Weight of the optional sequence-wise balance loss.")

    @field_validator("layer_pattern")
    @classmethod
    def _expand_pattern(cls, value: str) -> str:
        return expand_layer_pattern(value)

    @model_validator(mode="after")
    def _check(self) -> "ModelConfig":
        if self.n_active > self.n_experts:
            raise ValueError(f"n_active={self.n_active} exceeds n_experts={self.n_experts}")
        if self.n_experts % self.n_groups:
            raise ValueError(f"n_experts={self.n_experts} is not divisible by n_groups={self.n_groups}")
        if self.topk_groups > self.n_groups:
            raise ValueError(f"topk_groups={self.topk_groups} exceeds n_groups={self.n_groups}")
        if self.first_dense_layers > self.n_layers:
            raise ValueError(f"first_dense_layers={self.first_dense_layers} exceeds {self.n_layers} layers")
        if self.index_rope_dim > self.index_head_dim or self.index_rope_dim % 2:
            raise ValueError(f"index_rope_dim={self.index_rope_dim} must be even and <= index_head_dim")
        if self.qk_rope_dim % 2:
            raise ValueError(f"qk_rope_dim={self.qk_rope_dim} must be even")
        return self

    @property
    def n_layers(self) -> int:
        return len(self.layer_pattern)

    def layer_kind(self, layer_idx: int) -> LayerKind:
        """The attention kind of one layer."""
        return self.layer_pattern[layer_idx]  # type: ignore[return-value]

    def is_moe(self, layer_idx: int) -> bool:
        """Whether the layer's FFN is a mixture of experts (else dense SwiGLU)."""
        return layer_idx >= self.first_dense_layers

    @property
    def moe_layers(self) -> list[int]:
        return [i for i in range(self.n_layers) if self.is_moe(i)]

    @property
    def latent_eps(self) -> float:
        """The epsilon latent attention's inner norms use."""
        return self.norm_eps if self.latent_norm_eps is None else self.latent_norm_eps

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_dim + self.qk_rope_dim
