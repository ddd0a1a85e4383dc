"""The memory of one learner GPU and one rollout GPU, and the GPUs the recipe needs.

Parameter counts come from jointrl.model.info, which builds the model on the meta device: nothing is
allocated, whatever the scale. P = every parameter, P_e = routed-expert parameters, P_d = P - P_e (attention,
dense and shared FFNs, routers, norms, embedding and head).

Learner rank, with R = learner.ranks, E = learner.ep_size, w = 2 bytes (bf16) or 4 (fp32):
  weights      (P_d + P_e / E) * w           non-expert weights are replicated on every rank; a rank holds
                                             1/E of each MoE layer's routed experts, and each expert shard
                                             is replicated over R / E expert-data-parallel ranks
  gradients    ZeRO 1: (P_d + P_e / E) * w;  ZeRO 2: P / R * w (partitioned over the data-parallel groups:
                                             P_d / R + (P_e / E) / (R / E))
  optimizer    P / R * o                     Adam partitioned by ZeRO 1 and 2 alike; o = 12 bytes with bf16
                                             (fp32 master copy, first and second moment), 8 with fp32
  activations  T * w * A + min(T, C) * V * 8 T = learner.micro_batch_tokens; the second term is one chunk of
                                             fp32 logits and their gradient (C = the fused log-prob kernel's
                                             chunk, V = vocab)
      A = sum over layers of width(layer)   without activation checkpointing: what every layer keeps for
                                             its backward, per token
      A = n_layers * dim + max width(layer) with learner.activation_checkpointing: each layer's input, plus
                                             the one layer being recomputed
      width(layer) = 4 dim (residual stream and norm outputs) + attention + FFN, where
        attention K (delta):  6 h_k d_k + 2 r    q, k, v, decay gate, output gate, output; two low-rank gates
        attention L (latent): q_lora + kv_lora + rope + h (2 d_qk + 3 d_v)   latents, q, k, v, output, gate
        attention S (sparse): as L + index_heads * index_dim + index_dim + index_heads   indexer q, k, weights
        FFN dense:            3 dense_hidden                                  gate, up, their product
        FFN MoE:              n_experts + k dim + 3 expert_hidden (k + n_shared)   router scores, the token
                                             copies sent to its k experts, each expert's gate, up, product
  reserve      RESERVE_GIB                   CUDA context, communication buffers, allocator fragmentation

Rollout worker, spread over G = plan.gpus_per_worker GPUs:
  weights      (P_d * 2 + P_e * b_e) / G     b_e = 4.25 bits (MXFP4 with rollout.mxfp4_experts) or 2 bytes
  cache        rollout.max_rows * (latent KV + index keys of S/L layers at plan.max_context tokens
               + recurrent and conv state of K layers) / G
  reserve      RESERVE_GIB
GPUs needed = R + rollout.workers * G. The decode working set (one token per row) is small next to these.
"""
from __future__ import annotations

from dataclasses import dataclass

from jointrl.rl.config.run import RunConfig

GIB = 1024**3
RESERVE_GIB = 2.0
# Adam's bytes per parameter: fp32 master + two fp32 moments with bf16 weights; the two moments with fp32.
OPTIMIZER_BYTES = {"bf16": 12, "fp32": 8}
DTYPE_BYTES = {"bf16": 2, "fp32": 4}
ITEM_ORDER = ("weights", "gradients", "optimizer states", "activations", "KV / state cache", "reserve")


def attention_width(cfg, kind: str) -> int:
    """Elements per token an attention layer of this kind keeps for its backward (see the module docstring)."""
    if kind == "K":
        return 6 * cfg.kda_heads * cfg.kda_head_dim + 2 * cfg.kda_gate_rank
    latent = cfg.q_lora_rank + cfg.kv_lora_rank + cfg.qk_rope_dim + cfg.attn_heads * (
        2 * cfg.qk_head_dim + 3 * cfg.v_head_dim
    )
    if kind == "S":
        latent += cfg.index_heads * cfg.index_head_dim + cfg.index_head_dim + cfg.index_heads
    return latent


def ffn_width(cfg, layer: int) -> int:
    """Elements per token a layer's FFN (dense or MoE) keeps for its backward."""
    if not cfg.is_moe(layer):
        return 3 * cfg.dense_hidden
    return cfg.n_experts + cfg.n_active * cfg.dim + 3 * cfg.expert_hidden * (cfg.n_active + cfg.n_shared)


def layer_widths(cfg) -> list[int]:
    """Per layer, the activation elements per token it keeps for its backward."""
    return [
        4 * cfg.dim + attention_width(cfg, cfg.layer_kind(i)) + ffn_width(cfg, i) for i in range(cfg.n_layers)
    ]


def activation_bytes(cfg: RunConfig) -> int:
    """Activation memory of one learner micro-batch (see the module docstring)."""
    from jointrl.kernels.logprobs import DEFAULT_CHUNK

    model, tokens = cfg.model, cfg.learner.micro_batch_tokens
    widths = layer_widths(model)
    per_token = model.n_layers * model.dim + max(widths) if cfg.learner.activation_checkpointing else sum(widths)
    logits = min(tokens, DEFAULT_CHUNK) * model.vocab_size * 4 * 2
    return tokens * DTYPE_BYTES[cfg.learner.dtype] * per_token + logits


@dataclass
class DevicePlan:
    """The memory of one GPU of a role, item by item, against its capacity."""

    role: str
    gpus: int  # GPUs of this role in the whole job
    items: dict[str, float]  # item -> bytes on one GPU
    capacity_gib: float

    @property
    def total(self) -> float:
        """Bytes on one GPU."""
        return sum(self.items.values())

    @property
    def fits(self) -> bool:
        """Whether one GPU's total is within its capacity."""
        return self.total <= self.capacity_gib * GIB


@dataclass
class Plan:
    """The learner and rollout layout of a recipe, and whether each fits."""

    learner: DevicePlan
    rollout: DevicePlan
    total_params: int
    routed_params: int
    context: int  # tokens a worker's cache is sized for

    @property
    def gpus(self) -> int:
        """GPUs the recipe needs: learner ranks plus every worker's GPUs."""
        return self.learner.gpus + self.rollout.gpus

    @property
    def fits(self) -> bool:
        """Whether both roles fit."""
        return self.learner.fits and self.rollout.fits


def make_plan(cfg: RunConfig, gpu_mem_gib: float | None = None) -> Plan:
    """The plan of a recipe; gpu_mem_gib, when given, replaces both roles' capacities from the recipe."""
    from jointrl.model.info import model_info

    if gpu_mem_gib is not None and not gpu_mem_gib > 0:
        raise ValueError(f"--gpu-mem-gib must be positive, got {gpu_mem_gib}")
    model, learner, rollout = cfg.model, cfg.learner, cfg.rollout
    context = cfg.plan.max_context if cfg.plan.max_context is not None else model.max_seq_len
    if context > model.max_seq_len:
        raise ValueError(
            f"plan.max_context={context} exceeds the model's max_seq_len={model.max_seq_len}"
        )
    info = model_info(model, context=context)
    total, routed = info.total_params, info.routed_expert_params
    dense = total - routed
    w = DTYPE_BYTES[learner.dtype]
    held = dense + routed / learner.ep_size
    grads = held * w if learner.zero_stage == 1 else total / learner.ranks * w
    learner_plan = DevicePlan(
        role="learner rank",
        gpus=learner.ranks,
        items={
            "weights": held * w,
            "gradients": grads,
            "optimizer states": total / learner.ranks * OPTIMIZER_BYTES[learner.dtype],
            "activations": float(activation_bytes(cfg)),
            "reserve": RESERVE_GIB * GIB,
        },
        capacity_gib=gpu_mem_gib if gpu_mem_gib is not None else cfg.plan.learner_gpu_mem_gib,
    )
    g = cfg.plan.gpus_per_worker
    weights = info.weights_mxfp4_bytes if rollout.mxfp4_experts else info.weights_bf16_bytes
    rollout_plan = DevicePlan(
        role="rollout worker",
        gpus=rollout.workers * g,
        items={
            "weights": weights / g,
            "KV / state cache": rollout.max_rows * (info.attn_cache_bytes + info.kda_state_bytes) / g,
            "reserve": RESERVE_GIB * GIB,
        },
        capacity_gib=gpu_mem_gib if gpu_mem_gib is not None else cfg.plan.rollout_gpu_mem_gib,
    )
    return Plan(learner_plan, rollout_plan, total, routed, context)
