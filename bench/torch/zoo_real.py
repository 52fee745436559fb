# The real-size tier of kiln's model zoo in PyTorch (the models of `kiln bench gpu --size real`):
# GPT-2 small (kiln's nn::TinyGpt at vocab 50304, seq 1024, width 768, 12 heads, 12 layers), a
# wide MLP and a wide pre-norm transformer block, each written as a PyTorch user writes it at
# their best, and, for the models with attention, also as the op-by-op mirror of kiln.
#
#   module, make_inputs = make_model("gpt2_small", "cuda")                      # sdpa attention
#   module, make_inputs = make_model("gpt2_small", "cuda", attention="mirror")  # kiln's ops
#   loss = make_loss("gpt2_small", "cuda")(module(*make_inputs()))
#
# The models are zoo.py's classes at other sizes, so the parameter names are zoo.py's and kiln's
# (wte.weight, blocks.0.attn.qkv.weight, ..., head.weight): a state_dict that kiln saved as
# safetensors loads with load_state_dict(strict=True). GELU is the exact erf form, except in
# gpt2_small, which uses GPT-2's own tanh form (as kiln's zoo does); LayerNorm eps is 1e-5, as in
# zoo.py. The two attentions share zoo.CausalSelfAttention's parameters (one qkv
# Linear C -> 3C laid out [q | k | v], then proj):
#   "sdpa"   - F.scaled_dot_product_attention(q, k, v, is_causal=True), PyTorch's fused kernel;
#   "mirror" - zoo.py's matmul, scale, causal where, softmax, matmul, as kiln computes it.
# A model of one seed holds the same weights under either attention (only the forward differs).
import torch
import torch.nn as nn
import torch.nn.functional as F

import zoo  # bench/torch/zoo.py, beside this file

NAMES = ["gpt2_small", "mlp", "transformer_block"]
ATTENTION_MODELS = ["gpt2_small", "transformer_block"]  # the ones with an "sdpa" and a "mirror" form

# The real-size shapes.
GPT2_SMALL = dict(vocab=50304, seq=1024, width=768, heads=12, layers=12, batch=8, gelu="tanh")
MLP = dict(batch=8192, width=2048, hidden=8192)
TRANSFORMER_BLOCK = dict(batch=8, seq=1024, width=1024, heads=16)


class SdpaSelfAttention(zoo.CausalSelfAttention):
    """zoo.CausalSelfAttention's parameters, computed through one fused
    F.scaled_dot_product_attention(is_causal=True) (its default scale is 1/sqrt(D))."""

    def forward(self, x):
        B, T, C = x.shape
        D = C // self.heads
        q, k, v = (t.view(B, T, self.heads, D).transpose(1, 2) for t in self.qkv(x).split(C, dim=-1))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


ATTENTION = {"sdpa": SdpaSelfAttention, "mirror": zoo.CausalSelfAttention}


def set_attention(module, attention):
    """Every zoo.CausalSelfAttention inside module computes with `attention` ("sdpa" or "mirror").
    Only the class changes: the parameters (and so the state_dict) stay as they are."""
    if attention not in ATTENTION:
        raise ValueError(f"zoo_real: unknown attention '{attention}'; known: {', '.join(ATTENTION)}")
    for m in module.modules():
        if isinstance(m, zoo.CausalSelfAttention):
            m.__class__ = ATTENTION[attention]
    return module


def _gpt2_small(device):
    c = GPT2_SMALL
    module = zoo.TinyGpt(c["vocab"], c["seq"], c["width"], c["heads"], c["layers"], c["gelu"])
    shape = (c["batch"], c["seq"])
    return module, lambda: (torch.randint(0, c["vocab"], shape, dtype=torch.int64, device=device),)


def _mlp(device):
    c = MLP
    module = nn.Sequential(nn.Linear(c["width"], c["hidden"]), nn.GELU(),
                           nn.Linear(c["hidden"], c["width"]), nn.LayerNorm(c["width"], eps=1e-5))
    return module, lambda: (torch.randn(c["batch"], c["width"], device=device),)


def _transformer_block(device):
    c = TRANSFORMER_BLOCK
    module = zoo.TransformerBlock(c["width"], c["heads"])
    return module, lambda: (torch.randn(c["batch"], c["seq"], c["width"], device=device),)


_MAKERS = {"gpt2_small": _gpt2_small, "mlp": _mlp, "transformer_block": _transformer_block}


def make_model(name, device, attention="sdpa"):
    """(module in eval mode, f32, on device; make_inputs() -> tuple of fresh random inputs).
    attention is "sdpa" or "mirror"; models without attention (mlp) ignore it."""
    if name not in _MAKERS:
        raise ValueError(f"zoo_real: unknown model '{name}'; known models: {', '.join(NAMES)}")
    if attention not in ATTENTION:
        raise ValueError(f"zoo_real: unknown attention '{attention}'; known: {', '.join(ATTENTION)}")
    with torch.device(device):  # the parameters are created and initialised on the device
        module, make_inputs = _MAKERS[name](device)
    set_attention(module, attention)
    return module.to(device=device, dtype=torch.float32).eval(), make_inputs


def make_loss(name, device, targets=None):
    """A scalar training loss of the model's output: for gpt2_small, cross-entropy of the logits
    against targets (int64 (8192,); drawn once here when not given), output.float().mean() for
    the others."""
    if name != "gpt2_small":
        return lambda out: out.float().mean()
    c = GPT2_SMALL
    if targets is None:
        targets = torch.randint(0, c["vocab"], (c["batch"] * c["seq"],), dtype=torch.int64, device=device)
    return lambda logits: F.cross_entropy(logits.reshape(-1, c["vocab"]).float(), targets)


# The smoke check's inputs on the CPU: a slice of the real batch, so that it runs in seconds.
_CPU_SLICES = {"gpt2_small": (slice(0, 1), slice(0, 128)), "mlp": (slice(0, 64),),
               "transformer_block": (slice(0, 1), slice(0, 128))}


if __name__ == "__main__":
    # A smoke check: every model's output shape and parameter count, and how far the sdpa and
    # mirror forms of one model (the same weights) differ. On the CPU it runs on a slice.
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    for n in NAMES:
        torch.manual_seed(0)
        m, make_inputs = make_model(n, dev)
        inputs = make_inputs()
        if dev == "cpu":
            inputs = tuple(t[_CPU_SLICES[n]] for t in inputs)
        with torch.no_grad():
            out = m(*inputs)
            diff = "-"
            if n in ATTENTION_MODELS:
                diff = f"{(set_attention(m, 'mirror')(*inputs) - out).abs().max().item():.2e}"
        params = sum(p.numel() for p in m.parameters())
        print(f"{n:18s} {str(tuple(out.shape)):20s} {params:>11d} parameters  "
              f"finite={bool(out.isfinite().all())}  max |sdpa - mirror| {diff}")
        del m, out
