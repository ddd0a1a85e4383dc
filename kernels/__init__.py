"""Hot-path ops, one folder each: a pure-torch ground truth beside its Triton kernel and one dispatch point."""
