# kiln's model zoo (bench/zoo.cpp at ZooSize::bench, with the modules of dsl/nn/) in plain
# PyTorch, so that the GPU benchmark compares the same models at the same shapes.
#
#   module, make_inputs = make_model("mlp", "cuda")   # eval mode, f32
#   y = module(*make_inputs())                        # (64, 1024)
#
# Every forward mirrors kiln's op by op: the attention is matmul, scale, causal where, softmax,
# matmul (the chain kiln's compiled f32 graphs run on CUDA; bench_torch.py --attention sdpa swaps
# in F.scaled_dot_product_attention through zoo_real.set_attention), the causal mask is built from
# arange on every call as kiln builds it, GELU is the exact erf form (kiln's
# default), LayerNorm eps is 1e-5. Initialisations follow kiln's (PyTorch's defaults; GPT-2's
# N(0, 0.02) embeddings in TinyGpt); they do not change the timings.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

NAMES = ["mlp", "transformer_block", "norm_softmax", "tiny_gpt"]

# ZooSize::bench shapes (bench/zoo.cpp).
MLP = dict(batch=64, width=1024, hidden=4096)
TRANSFORMER_BLOCK = dict(batch=4, seq=256, width=512, heads=8)
NORM_SOFTMAX = dict(rows=2048, width=1024)
TINY_GPT = dict(vocab=11, seq=16, width=64, heads=4, layers=2, batch=32)  # the demo's configuration


class CausalSelfAttention(nn.Module):
    """dsl/nn/transformer.cpp: one qkv Linear (C -> 3C, laid out [q | k | v]), heads of C / heads."""

    def __init__(self, width, heads):
        super().__init__()
        assert width % heads == 0
        self.width, self.heads = width, heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        T, C, D = x.size(1), self.width, self.width // self.heads
        qkv = self.qkv(x)

        def head(i):  # (B, T, C) slice i of [q | k | v] -> (B, heads, T, D)
            return qkv.narrow(-1, i * C, C).unflatten(-1, (self.heads, D)).transpose(1, 2)

        pos = torch.arange(0, T, 1, dtype=torch.int64, device=x.device)
        causal = pos.unsqueeze(1) >= pos.unsqueeze(0)
        scores = torch.matmul(head(0), head(1).transpose(-2, -1)) * (1.0 / math.sqrt(D))
        y = torch.matmul(torch.softmax(torch.where(causal, scores, -math.inf), -1), head(2))
        return self.proj(y.transpose(1, 2).flatten(2))


class TransformerBlock(nn.Module):
    """Pre-norm: h = x + attn(ln1(x)); out = h + proj(gelu(fc(ln2(h)))), MLP width 4C."""

    def __init__(self, width, heads, gelu="none"):
        super().__init__()
        self.ln1 = nn.LayerNorm(width, eps=1e-5)
        self.attn = CausalSelfAttention(width, heads)
        self.ln2 = nn.LayerNorm(width, eps=1e-5)
        self.fc = nn.Linear(width, 4 * width)
        self.proj = nn.Linear(4 * width, width)
        self.gelu = gelu  # "none" (erf) or "tanh" (GPT-2's form), as kiln's nn::TransformerBlock

    def forward(self, x):
        h = x + self.attn(self.ln1(x))
        return h + self.proj(F.gelu(self.fc(self.ln2(h)), approximate=self.gelu))


class TinyGpt(nn.Module):
    """Token and position embeddings, N blocks, a final norm, a head without bias."""

    def __init__(self, vocab, seq, width, heads, layers, gelu="none"):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(seq, width)
        self.blocks = nn.ModuleList(TransformerBlock(width, heads, gelu) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width, eps=1e-5)
        self.head = nn.Linear(width, vocab, bias=False)
        with torch.no_grad():
            for w in (self.wte.weight, self.wpe.weight):
                w.copy_(torch.randn_like(w) * 0.02)

    def forward(self, tokens):
        pos = torch.arange(0, tokens.size(1), 1, dtype=torch.int64, device=tokens.device)
        x = self.wte(tokens) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


class NormSoftmax(nn.Module):
    """bench/zoo.cpp: log_softmax(ln2(softmax(ln1(x) * 2, -1) + x), -1), learnable norms."""

    def __init__(self, width):
        super().__init__()
        self.ln1 = nn.LayerNorm(width, eps=1e-5)
        self.ln2 = nn.LayerNorm(width, eps=1e-5)

    def forward(self, x):
        s = torch.softmax(self.ln1(x) * 2.0, -1)
        return torch.log_softmax(self.ln2(s + x), -1)


def _mlp(device):
    c = MLP
    module = nn.Sequential(nn.Linear(c["width"], c["hidden"]), nn.GELU(),
                           nn.Linear(c["hidden"], c["width"]), nn.LayerNorm(c["width"], eps=1e-5))
    return module, lambda: (torch.randn(c["batch"], c["width"], device=device),)


def _transformer_block(device):
    c = TRANSFORMER_BLOCK
    module = TransformerBlock(c["width"], c["heads"])
    return module, lambda: (torch.randn(c["batch"], c["seq"], c["width"], device=device),)


def _norm_softmax(device):
    c = NORM_SOFTMAX
    return NormSoftmax(c["width"]), lambda: (torch.randn(c["rows"], c["width"], device=device),)


def _tiny_gpt(device):
    c = TINY_GPT
    module = TinyGpt(c["vocab"], c["seq"], c["width"], c["heads"], c["layers"])
    shape = (c["batch"], c["seq"])
    return module, lambda: (torch.randint(0, c["vocab"], shape, dtype=torch.int64, device=device),)


_MAKERS = {"mlp": _mlp, "transformer_block": _transformer_block, "norm_softmax": _norm_softmax,
           "tiny_gpt": _tiny_gpt}


def make_model(name, device):
    """(module in eval mode, f32, on device; make_inputs() -> tuple of fresh random inputs)."""
    if name not in _MAKERS:
        raise ValueError(f"zoo: unknown model '{name}'; known models: {', '.join(NAMES)}")
    module, make_inputs = _MAKERS[name](device)
    return module.to(device=device, dtype=torch.float32).eval(), make_inputs


def make_loss(name, device):
    """A scalar training loss of the model's output: cross-entropy against fixed random targets
    for tiny_gpt's logits, output.float().mean() for the others."""
    if name != "tiny_gpt":
        return lambda out: out.float().mean()
    c = TINY_GPT
    targets = torch.randint(0, c["vocab"], (c["batch"] * c["seq"],), dtype=torch.int64, device=device)
    return lambda logits: F.cross_entropy(logits.reshape(-1, c["vocab"]).float(), targets)


if __name__ == "__main__":
    # A smoke check: every model's output shape on the CPU (or cuda when there is one).
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    for n in NAMES:
        m, inputs = make_model(n, dev)
        with torch.no_grad():
            out = m(*inputs())
        params = sum(p.numel() for p in m.parameters())
        print(f"{n:18s} {str(tuple(out.shape)):18s} {params:>10d} parameters  finite={bool(out.isfinite().all())}")
