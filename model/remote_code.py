"""transformers classes for native jointrl checkpoints; every native export ships them as modeling_jointrl.py.

The export (jointrl.model.standalone) writes this module and every jointrl module it imports into the
export directory with those imports made relative, so `AutoModelForCausalLM.from_pretrained(dir,
trust_remote_code=True)` runs where only torch, transformers and safetensors are installed. jointrl itself
never imports this module: it is source to ship.

  JointRLConfig       config.json: the ModelConfig fields at top level plus transformers' own keys.
  JointRLModel        the base model: embedding, jointrl's blocks, final norm -> last hidden state (+ cache).
  JointRLForCausalLM  the base model under `model` plus `lm_head`: logits, loss, generate() with a cache.

Weights: a native export keeps jointrl's names (embed.weight, layers.*, norm.weight, lm_head.weight), which
transformers places by its base-model prefix rule; save_pretrained writes the base model's tensors under
`model.`, which jointrl.model.checkpoint.from_pretrained reads back. The loss is jointrl's training
objective: next-token cross-entropy plus the blocks' aux losses (balance and indexer). Trained through
transformers, the routers' balancing biases stay where they are: jointrl's learner is what moves them.

MXFP4 checkpoints: the config moves `quantization_config` aside, so transformers' own MXFP4 quantizer
(which only knows gpt-oss experts) stays out of the way, and the MoE layers hold MXFP4Experts whose buffers
load the `*_blocks` / `*_scales` tensors as they are.

Shape legend: B = batch rows, T = new tokens this call, D = dim, V = vocab.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import torch
from torch import nn
from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import BaseModelOutputWithPast, MoeCausalLMOutputWithPast

from jointrl.model.cache import ModelCache
from jointrl.model.checkpoint import MODEL_TYPE
from jointrl.model.config import ModelConfig
from jointrl.model.mxfp4 import MXFP4Experts
from jointrl.model.transformer import Block, backbone


class JointRLConfig(PretrainedConfig):
    """config.json of a native checkpoint: the ModelConfig fields become attributes next to transformers' keys."""

    model_type = MODEL_TYPE
    # transformers' name for the width that other tools read (DeepSpeed's "auto" sizes, PEFT).
    attribute_map = {"hidden_size": "dim"}

    def __init__(self, use_cache: bool = True, tie_word_embeddings: bool = False, **kwargs):
        # Kept under another name so transformers does not hand the checkpoint to its gpt-oss MXFP4 quantizer.
        self.jointrl_quantization = kwargs.pop("quantization_config", None)
        self.use_cache = use_cache
        self.tie_word_embeddings = tie_word_embeddings
        super().__init__(**kwargs)

    def model_config(self) -> ModelConfig:
        """The jointrl ModelConfig this checkpoint was written from."""
        return ModelConfig(**{name: getattr(self, name) for name in ModelConfig.model_fields if hasattr(self, name)})

    def to_dict(self) -> dict:
        """As jointrl writes it, so a re-saved config still reads in jointrl (quantization_config included)."""
        out = {k: v for k, v in super().to_dict().items() if k != "jointrl_quantization"}
        if self.jointrl_quantization is not None:
            out["quantization_config"] = self.jointrl_quantization
        return out


class JointRLCache(ModelCache):
    """jointrl's ModelCache (latent KV, recurrent and conv state) as generate() carries it between steps."""

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """Columns seen so far, padding included."""
        return self.length


@dataclass
class JointRLModelOutput(BaseModelOutputWithPast):
    """The base model's output plus the blocks' aux losses, which the causal LM adds to its loss."""

    aux_loss: torch.Tensor | None = None


class JointRLPreTrainedModel(PreTrainedModel):
    """What both classes share: the config class, the base-model prefix, checkpointing and device-map units."""

    config_class = JointRLConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    # A block's attention and MoE must sit on one device.
    _no_split_modules = ["Block"]

    def _init_weights(self, module: nn.Module) -> None:
        # jointrl's layers initialise themselves when built; a checkpoint then overwrites every tensor.
        pass


class JointRLModel(JointRLPreTrainedModel):
    """Embedding, jointrl's hybrid-attention MoE blocks and the final norm (jointrl's Transformer without its head)."""

    def __init__(self, config: JointRLConfig):
        super().__init__(config)
        cfg = config.model_config()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layers))
        self.norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        # transformers' gradient_checkpointing_enable sets this and _gradient_checkpointing_func.
        self.gradient_checkpointing = False
        if config.jointrl_quantization is not None:
            for block in self.layers:
                if block.is_moe:
                    block.ffn.experts = MXFP4Experts(cfg.n_experts, cfg.dim, cfg.expert_hidden)
        self.post_init()

    def get_input_embeddings(self) -> nn.Module:
        return self.embed

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.embed = value

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        past_key_values: JointRLCache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        cache: JointRLCache | None = None,
        **kwargs,
    ) -> JointRLModelOutput:
        """Hidden states [B, T, D] after the final norm of input_ids [B, T] (or inputs_embeds [B, T, D]).

        attention_mask [B, T] (or [B, past + T]) is 0 on padding; position_ids default to jointrl's (real tokens
        counted on from the cache). `cache` is transformers' current name for past_key_values; either continues
        a JointRLCache. use_cache defaults to config.use_cache outside training.
        """
        _refuse_unsupported(kwargs)
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids and inputs_embeds")
        if past_key_values is not None and cache is not None:
            raise ValueError("pass the cache as `cache` or as `past_key_values`, not both")
        cache = cache if cache is not None else past_key_values
        x = self.embed(input_ids) if inputs_embeds is None else inputs_embeds  # [B, T, D]
        b, t = x.shape[:2]
        if use_cache is None:
            # A training forward never continues, so a cache there would only cost memory (and checkpointing).
            use_cache = self.config.use_cache and not self.training
        if use_cache and cache is None:
            cache = JointRLCache.allocate(self.cfg, b, t, device=x.device, dtype=x.dtype)
        # transformers' mask covers every column seen; the cache already holds the earlier ones' validity.
        valid = attention_mask[:, -t:].bool() if attention_mask is not None else None  # [B, T]
        positions = position_ids.expand(b, t) if position_ids is not None else None  # [B, T]
        recompute = None
        if self.gradient_checkpointing and self.training:
            # Always non-reentrant: reentrant checkpointing runs blocks under no_grad, where they skip their aux
            # losses (the DSA indexer's) and lose their gradients. transformers' other options (offload) stay.
            func = self._gradient_checkpointing_func
            recompute = partial(func.func, *func.args, **{**func.keywords, "use_reentrant": False})
        out = backbone(self.layers, self.norm, x, valid, cache, positions=positions, checkpoint_fn=recompute)
        return JointRLModelOutput(last_hidden_state=out.hidden, cache=cache if use_cache else None, aux_loss=out.aux_loss)


class JointRLForCausalLM(JointRLPreTrainedModel, GenerationMixin):
    """The base model plus the LM head: logits [B, T, V], jointrl's loss, and generate() with jointrl's cache."""

    # Applied only when config.tie_word_embeddings is true (a tied ModelConfig; its checkpoint has no head).
    _tied_weights_keys = {"lm_head.weight": "model.embed.weight"}

    def __init__(self, config: JointRLConfig):
        super().__init__(config)
        self.model = JointRLModel(config)
        self.lm_head = nn.Linear(config.dim, config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self) -> nn.Module:
        return self.model.embed

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.model.embed = value

    def get_output_embeddings(self) -> nn.Module:
        return self.lm_head

    def set_output_embeddings(self, value: nn.Module) -> None:
        self.lm_head = value

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        past_key_values: JointRLCache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        cache: JointRLCache | None = None,
        **kwargs,
    ) -> MoeCausalLMOutputWithPast:
        """fp32 logits [B, T, V] (or of the last logits_to_keep positions); labels [B, T] give the loss.

        The loss is transformers' shifted cross-entropy (-100 ignored, num_items_in_batch honoured) plus
        aux_loss, the blocks' balance and indexer losses that jointrl trains with.
        """
        loss_kwargs = {k: kwargs.pop(k) for k in ("num_items_in_batch", "ignore_index") if k in kwargs}
        out = self.model(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
            past_key_values=past_key_values, inputs_embeds=inputs_embeds, use_cache=use_cache, cache=cache, **kwargs,
        )
        hidden = out.last_hidden_state
        if isinstance(logits_to_keep, int):
            hidden = hidden[:, -logits_to_keep:] if logits_to_keep > 0 else hidden
        else:
            hidden = hidden[:, logits_to_keep]
        logits = self.lm_head(hidden).float()  # [B, T, V]
        loss = None
        if labels is not None:
            loss = self.loss_function(logits, labels, self.config.vocab_size, **loss_kwargs) + out.aux_loss
        return MoeCausalLMOutputWithPast(loss=loss, aux_loss=out.aux_loss, logits=logits, cache=out.cache)

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        # generate() must not build a transformers DynamicCache: forward allocates a JointRLCache instead ...
        return False

    def prepare_inputs_for_generation(
        self,
        input_ids: torch.LongTensor,
        cache: JointRLCache | None = None,
        past_key_values: JointRLCache | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        logits_to_keep: int | None = None,
        **kwargs,
    ) -> dict:
        """... and each step feeds only the columns that cache has not seen; positions follow from mask and cache."""
        if inputs_embeds is not None:
            raise ValueError("generate() from inputs_embeds is not supported by this model; pass input_ids")
        cache = cache if cache is not None else past_key_values
        if cache is not None:
            input_ids = input_ids[:, cache.length :]
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask, "cache": cache, "use_cache": use_cache}
        if logits_to_keep is not None:
            inputs["logits_to_keep"] = logits_to_keep
        return inputs


def _refuse_unsupported(kwargs: dict) -> None:
    """Raise for the standard outputs this model does not produce instead of returning without them."""
    for name in ("output_attentions", "output_hidden_states", "output_router_logits"):
        if kwargs.get(name):
            raise ValueError(f"{name}=True is not supported by JointRLForCausalLM")
