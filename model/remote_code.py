"""transformers remote code for native jointrl checkpoints, copied into each export as modeling_jointrl.py.

`AutoModelForCausalLM.from_pretrained(dir, trust_remote_code=True)` loads it through config.json's auto_map.
It wraps jointrl's own Transformer, so jointrl (and transformers) must be installed where the checkpoint is
loaded. jointrl itself never imports this module: it is a file to ship, not part of the runtime.

MXFP4 checkpoints: the config moves `quantization_config` aside, so transformers' own MXFP4 quantizer
(which only knows gpt-oss experts) stays out of the way, and the model holds MXFP4Experts whose buffers
load the `*_blocks` / `*_scales` tensors as they are.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutput

from jointrl.model.checkpoint import MODEL_TYPE, use_mxfp4_experts_
from jointrl.model.config import ModelConfig
from jointrl.model.transformer import Transformer


class JointRLConfig(PretrainedConfig):
    """config.json of a native checkpoint: the ModelConfig fields at top level plus transformers' own keys."""

    model_type = MODEL_TYPE

    def __init__(self, **kwargs):
        # Kept under another name so transformers does not hand the checkpoint to its gpt-oss MXFP4 quantizer.
        self.jointrl_quantization = kwargs.pop("quantization_config", None)
        self.jointrl = {k: kwargs.pop(k) for k in list(kwargs) if k in ModelConfig.model_fields}
        super().__init__(**kwargs)

    def model_config(self) -> ModelConfig:
        """The jointrl ModelConfig this checkpoint was written from."""
        return ModelConfig(**self.jointrl)

    def to_dict(self) -> dict:
        """Flat again, as jointrl writes it, so a re-saved config still reads in jointrl."""
        out = {k: v for k, v in super().to_dict().items() if k not in ("jointrl", "jointrl_quantization")}
        out.update(self.jointrl)
        if self.jointrl_quantization is not None:
            out["quantization_config"] = self.jointrl_quantization
        return out


class JointRLForCausalLM(PreTrainedModel, GenerationMixin):
    """jointrl's Transformer behind transformers' causal-LM interface; weights keep jointrl's names under `model.`."""

    config_class = JointRLConfig
    base_model_prefix = "model"
    _no_split_modules = ["Block"]
    # Applied only when config.tie_word_embeddings is true (a tied ModelConfig; its checkpoint has no head).
    _tied_weights_keys = {"model.lm_head.weight": "model.embed.weight"}

    def __init__(self, config: JointRLConfig):
        super().__init__(config)
        self.model = Transformer(config.model_config())
        if config.jointrl_quantization is not None:
            use_mxfp4_experts_(self.model)
        self.post_init()

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        # jointrl's ModelCache is not a transformers Cache, so generate() keeps none ...
        return False

    def prepare_inputs_for_generation(self, input_ids, attention_mask=None, **kwargs) -> dict:
        """... and feeds the whole sequence at every step (generate would otherwise pass only the new token)."""
        return {"input_ids": input_ids, "attention_mask": attention_mask}

    def _init_weights(self, module: torch.nn.Module) -> None:
        # jointrl's layers initialise themselves when built; a checkpoint then overwrites every tensor.
        pass

    def get_input_embeddings(self) -> torch.nn.Module:
        return self.model.embed

    def get_output_embeddings(self) -> torch.nn.Module:
        return self.model.lm_head

    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        **kwargs,
    ) -> CausalLMOutput:
        """Logits [B, T, V] of input_ids [B, T]; attention_mask 0 marks left padding; labels give the LM loss."""
        valid = attention_mask.bool() if attention_mask is not None else None
        logits = self.model(input_ids, valid=valid).logits
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten(), ignore_index=-100)
        return CausalLMOutput(loss=loss, logits=logits)
