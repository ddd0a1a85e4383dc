"""logprobs op: the chunked torch form and the interpreted Triton kernels against the full-logits reference.

Truth is `full_logprobs` on fp64 copies of the inputs. Each fp32 path may differ from it by at most
twice what the plain fp32 full-logits reference itself gets wrong (flash-attention's rule), plus one
fp32 rounding of the quantity's largest value, for a reference that happens to round almost exactly.
Measured here: at most 1.8x the reference's error (Triton d_weight, entropy-gradient case), mostly under
1x. The errors are printed in every failure message.
"""
import weakref

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from jointrl.kernels import logprobs as op
from jointrl.kernels.logprobs import naive

# id: (N, V, D, temperature, chunk_size, return_entropy, outputs in the loss)
CASES = {
    # Several chunks (24 is no multiple of any tile), V and D off the tile grid, vocabulary split 2 + 2 tiles.
    "N63-V100-D40-T0.7-chunk24": (63, 100, 40, 0.7, 24, True, ("logprobs", "entropy")),
    # The whole vocabulary inside one (partial) tile and one chunk.
    "N63-V10-D24-T1.0-V<tile": (63, 10, 24, 1.0, naive.DEFAULT_CHUNK, True, ("logprobs", "entropy")),
    # Entropy off: returned as None, never computed; uneven vocabulary split (2 + 1 tiles).
    "N63-V70-D16-T1.0-no-entropy": (63, 70, 16, 1.0, 32, False, ("logprobs",)),
    # Only the entropy enters the loss, so the logprob gradient arrives as None; 3 single-tile splits.
    "N17-V70-D20-T0.7-entropy-grad": (17, 70, 20, 0.7, 40, True, ("entropy",)),
}


def make_inputs(n, v, d):
    """Logits with a spread of a few units (like a trained head); targets include ids 0 and V - 1."""
    hidden = torch.randn(n, d) * 1.5
    weight = torch.randn(v, d) * (2.0 / d**0.5)
    targets = torch.randint(0, v, (n,))
    targets[0], targets[-1] = 0, v - 1
    return hidden, weight, targets


def run(fn, hidden, weight, targets, loss_on, **kwargs):
    """Outputs and gradients of one path, as fp64 for comparison: {name: tensor}."""
    h = hidden.clone().requires_grad_()
    w = weight.clone().requires_grad_()
    logprobs, entropy = fn(h, w, targets, **kwargs)
    # Fixed cotangents of both signs, so each output's gradient is weighted differently per token.
    gen = torch.Generator().manual_seed(1)
    outputs = {"logprobs": logprobs, "entropy": entropy}
    loss = sum((outputs[name].double() * torch.randn(len(targets), generator=gen, dtype=torch.float64)).sum()
               for name in loss_on)
    loss.backward()
    result = {"logprobs": logprobs, "d_hidden": h.grad, "d_weight": w.grad}
    if entropy is not None:
        result["entropy"] = entropy
    out_dtype = torch.float64 if hidden.dtype == torch.float64 else torch.float32
    assert logprobs.dtype == out_dtype and h.grad.dtype == hidden.dtype and w.grad.dtype == weight.dtype
    return {name: x.detach().double() for name, x in result.items()}


def assert_close_to_truth(got, fp32_ref, truth, factor=2.0):
    """Each tensor's max error vs truth is at most factor x the fp32 reference's own, plus one rounding."""
    for name, want in truth.items():
        assert got[name].shape == want.shape, f"{name}: shape {tuple(got[name].shape)} != {tuple(want.shape)}"
        err = (got[name] - want).abs().max().item()
        ref_err = (fp32_ref[name] - want).abs().max().item()
        floor = torch.finfo(torch.float32).eps * want.abs().max().item()
        bound = factor * ref_err + floor
        assert err <= bound, f"{name}: error {err:.3g} > bound {bound:.3g} (fp32 reference error {ref_err:.3g})"


@pytest.mark.parametrize("path", ["naive", "triton"])
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_matches_full_reference(path, case, monkeypatch):
    monkeypatch.setenv("JOINTRL_KERNELS", path)
    monkeypatch.setenv("JOINTRL_POISON_OUTPUTS", "1")
    n, v, d, temperature, chunk, with_entropy, loss_on = case
    hidden, weight, targets = make_inputs(n, v, d)
    args = dict(temperature=temperature, return_entropy=with_entropy)
    got = run(op.token_logprobs, hidden, weight, targets, loss_on, chunk_size=chunk, **args)
    fp32_ref = run(naive.full_logprobs, hidden, weight, targets, loss_on, **args)
    truth = run(naive.full_logprobs, hidden.double(), weight.double(), targets, loss_on, **args)
    assert ("entropy" in got) == with_entropy
    assert_close_to_truth(got, fp32_ref, truth)


@pytest.mark.parametrize("path", ["naive", "triton"])
def test_outputs_are_fp32_and_gradients_keep_input_dtype(path, monkeypatch):
    monkeypatch.setenv("JOINTRL_KERNELS", path)
    hidden, weight, targets = make_inputs(5, 40, 16)
    h, w = hidden.requires_grad_(), weight.requires_grad_()
    logprobs, entropy = op.token_logprobs(h, w, targets, chunk_size=16)
    assert logprobs.dtype == entropy.dtype == torch.float32 and logprobs.shape == entropy.shape == (5,)
    assert bool((logprobs <= 0).all()) and bool((entropy >= 0).all())
    (logprobs.sum() + entropy.sum()).backward()
    assert h.grad.dtype == w.grad.dtype == torch.float32


def test_naive_backward_passes_gradcheck():
    hidden, weight, targets = (x.double() if x.is_floating_point() else x for x in make_inputs(5, 13, 4))
    hidden.requires_grad_()
    weight.requires_grad_()
    for chunk in (1, 4, 13):
        both = lambda h, w: naive.token_logprobs(h, w, targets, 0.7, chunk)  # noqa: E731
        assert torch.autograd.gradcheck(both, (hidden, weight))


@pytest.mark.parametrize("path", ["naive", "triton"])
def test_bf16_inputs_compute_in_fp32(path, monkeypatch):
    monkeypatch.setenv("JOINTRL_KERNELS", path)
    monkeypatch.setenv("JOINTRL_POISON_OUTPUTS", "1")
    hidden, weight, targets = make_inputs(40, 90, 32)
    hidden, weight = hidden.bfloat16(), weight.bfloat16()
    loss_on = ("logprobs", "entropy")
    got = run(op.token_logprobs, hidden, weight, targets, loss_on, temperature=0.7, chunk_size=32)
    # The same bf16-rounded inputs: outputs are fp32 sums, so the fp32 rule applies to them ...
    fp32_ref = run(naive.full_logprobs, hidden.float(), weight.float(), targets, loss_on, temperature=0.7)
    truth = run(naive.full_logprobs, hidden.double(), weight.double(), targets, loss_on, temperature=0.7)
    outputs = ("logprobs", "entropy")
    assert_close_to_truth(got, fp32_ref, {name: truth[name] for name in outputs})
    # ... while bf16 gradients allow two bf16 roundings of their largest value: the result's own, and
    # (Triton) the bf16 dlogits chunk fed to the tensor-core matmuls.
    for name in ("d_hidden", "d_weight"):
        err = (got[name] - truth[name]).abs().max().item()
        bound = 2 * torch.finfo(torch.bfloat16).eps * truth[name].abs().max().item()
        assert err <= bound, f"{name}: error {err:.3g} > two bf16 roundings {bound:.3g}"


class LiveTensorBytes(TorchDispatchMode):
    """Peak bytes of the tensor storages that ops create while the mode is on (frees seen via weakrefs).

    Storages of the `existing` tensors (and views of them) are not counted. Exact for what torch
    allocates, cheap per op, and independent of the process's allocator and of other processes.
    """

    def __init__(self, existing):
        super().__init__()
        self.live = self.peak = 0
        self._counted = {id(t.untyped_storage()) for t in existing}

    def _freed(self, key, nbytes):
        self._counted.discard(key)
        self.live -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if not isinstance(t, torch.Tensor) or id(t.untyped_storage()) in self._counted:
                continue
            storage = t.untyped_storage()
            self._counted.add(id(storage))
            self.live += storage.nbytes()
            self.peak = max(self.peak, self.live)
            weakref.finalize(storage, self._freed, id(storage), storage.nbytes())
        return out


def test_chunked_memory_is_n_times_chunk_not_n_times_vocab():
    n, v, d, chunk = 128, 4096, 16, 128
    hidden, weight, targets = make_inputs(n, v, d)
    h, w = hidden.requires_grad_(), weight.requires_grad_()
    peaks = {}
    variants = [("full", naive.full_logprobs, {}), ("chunked", naive.token_logprobs, {"chunk_size": chunk})]
    for name, fn, kwargs in variants:
        h.grad = w.grad = None
        with LiveTensorBytes([h, w, targets]) as tracker:
            logprobs, entropy = fn(h, w, targets, 0.7, **kwargs)
            (logprobs.sum() + entropy.sum()).backward()
            del logprobs, entropy
        peaks[name] = tracker.peak
    fp32 = 4
    # The measure sees [N, V] buffers when they exist (the reference holds several at once) ...
    one_nv = n * v * fp32
    assert peaks["full"] >= 2 * one_nv, f"full-logits peak {peaks['full']} B; one [N, V] buffer is {one_nv} B"
    # ... while the chunked path holds both gradients plus a few [N, C] buffers: 0.6 MiB, where [N, V] is 2 MiB.
    bound = (n * d + v * d) * fp32 + 6 * n * chunk * fp32
    assert peaks["chunked"] <= bound, f"chunked peak {peaks['chunked']} B > {bound} B (full logits: {peaks['full']} B)"

    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda x: saved.append(x.numel()) or x, lambda x: x):
        naive.token_logprobs(h, w, targets, 0.7, chunk)
    assert max(saved) == v * d, f"largest tensor saved for backward has {max(saved)} elements; weight has {v * d}"


BAD = {
    "hidden-3d": (dict(hidden=torch.zeros(2, 3, 8)), "hidden"),
    "width-mismatch": (dict(weight=torch.zeros(10, 7)), "weight"),
    "dtype-mismatch": (dict(weight=torch.zeros(10, 8, dtype=torch.float64)), "dtype"),
    "target-out-of-range": (dict(targets=torch.tensor([0, 1, 2, 10])), r"\[0, 9\]"),
    "negative-target": (dict(targets=torch.tensor([0, -100, 2, 3])), "targets span"),
    "float-targets": (dict(targets=torch.zeros(4)), "int64"),
    "zero-temperature": (dict(temperature=0.0), "temperature"),
    "zero-chunk": (dict(chunk_size=0), "chunk_size"),
}


@pytest.mark.parametrize("path", ["naive", "triton"])
@pytest.mark.parametrize("change,message", BAD.values(), ids=BAD.keys())
def test_bad_inputs_raise_value_error(path, change, message, monkeypatch):
    monkeypatch.setenv("JOINTRL_KERNELS", path)
    kwargs = dict(hidden=torch.zeros(4, 8), weight=torch.zeros(10, 8), targets=torch.tensor([0, 1, 2, 9]))
    kwargs.update(change)
    with pytest.raises(ValueError, match=message):
        op.token_logprobs(**kwargs)
