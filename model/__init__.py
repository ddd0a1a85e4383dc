"""The policy architecture: config and presets, layers, caches, tokenizer, MXFP4, checkpoints, generation."""
