# The PyTorch side of experiment 5 (examples/05_custom_op.cpp): RMSNorm over the last dim of an
# f32 [8192, 4096] tensor, timed as the example times kiln (median of 20 calls after 3 of
# warm-up, each call followed by a device synchronize): the math in torch ops eagerly and under
# torch.compile (Inductor's generated kernel), F.rms_norm eagerly and compiled, and a custom op
# (torch.library.triton_op with a Triton kernel, a program a row, its fake registered) eagerly and
# under torch.compile. Checks each against the torch-ops result first.
#
#   python3 bench/torch/custom_op.py [--rows 8192] [--cols 4096] [--json FILE]
import argparse
import json
import time

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton

EPS = 1e-6


@triton.jit
def rms_norm_rows(x_ptr, w_ptr, y_ptr, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0)
    inv = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / cols + eps)
    tl.store(y_ptr + row * cols + offs, x * inv * w, mask=mask)


@triton_op("examples::rms_norm", mutates_args=())
def rms_norm_op(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    cols = x.shape[-1]
    rows = x.numel() // cols
    wrap_triton(rms_norm_rows)[(rows,)](x, w, y, cols, EPS, BLOCK=triton.next_power_of_2(cols))
    return y


def rms_norm_torch_ops(x, w):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS) * w


def median_ms(fn, runs=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ms = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ms.append((time.perf_counter() - t0) * 1e3)
    return sorted(ms)[len(ms) // 2]


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rows", type=int, default=8192)
    p.add_argument("--cols", type=int, default=4096)
    p.add_argument("--json")
    a = p.parse_args()
    torch.manual_seed(3)
    x = torch.randn(a.rows, a.cols, device="cuda")
    w = torch.randn(a.cols, device="cuda")
    want = rms_norm_torch_ops(x, w)
    variants = {
        "torch ops, eager": lambda: rms_norm_torch_ops(x, w),
        "torch ops, torch.compile (Inductor's kernel)": torch.compile(lambda: rms_norm_torch_ops(x, w)),
        "F.rms_norm, eager": lambda: F.rms_norm(x, (a.cols,), w, EPS),
        "F.rms_norm, torch.compile": torch.compile(lambda: F.rms_norm(x, (a.cols,), w, EPS)),
        "custom op (Triton), eager": lambda: rms_norm_op(x, w),
        "custom op (Triton), torch.compile": torch.compile(lambda: rms_norm_op(x, w)),
    }
    nbytes = (2 * a.rows * a.cols + a.cols) * 4
    rows = []
    print(f"RMSNorm [{a.rows}, {a.cols}] f32 on {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          "median of 20 after warm-up:")
    print("| variant | ms | GB/s |\n| --- | --- | --- |")
    for name, fn in variants.items():
        err = (fn() - want).abs().max().item()
        assert err < 1e-4, f"{name}: max error {err}"
        ms = median_ms(fn)
        rows.append({"name": name, "ms": ms, "gbps": nbytes / ms / 1e6, "max_error": err})
        print(f"| {name} | {ms:.4f} | {nbytes / ms / 1e6:.1f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": a.rows,
                       "cols": a.cols, "variants": rows}, f, indent=1)


if __name__ == "__main__":
    main()
