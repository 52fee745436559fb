# A weight gradient in two layouts, timed with cuBLAS through PyTorch (TF32): a linear layer's
# dW = dy^T x as PyTorch computes it ([out, in], row-major), against (x^T dy)^T, the product
# kiln's autograd computes for the transposed weight view of `x @ W.t()` ([in, out]) and then
# transposes. Same FLOPs, the output's M and N swapped; cuBLAS picks other kernels for each.
#
#   python3 bench/torch/gemm_layouts.py [--json FILE]
import argparse
import json

import torch

# (tokens, in, out) of GPT-2 small's weight gradients at batch 8 x 1024.
SHAPES = [(8192, 768, 2304), (8192, 768, 768), (8192, 768, 3072), (8192, 3072, 768), (8192, 768, 50304)]


def median_ms(fn, warmup=5, iters=30):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--json")
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.set_float32_matmul_precision("high")
    rows = []
    print(f"{'tokens x in x out':>22} {'dy^T x [out,in]':>16} {'x^T dy [in,out]':>16}  TFLOP/s")
    for t, i, o in SHAPES:
        x, dy = torch.randn(t, i, device="cuda"), torch.randn(t, o, device="cuda")
        torch_form = median_ms(lambda: dy.t() @ x)
        kiln_form = median_ms(lambda: x.t() @ dy)
        flop = 2.0 * t * i * o
        rows.append({"tokens": t, "in": i, "out": o, "dyT_x_ms": torch_form, "xT_dy_ms": kiln_form})
        print(f"{t:>8} x {i:>5} x {o:>5} {torch_form:13.3f} ms {kiln_form:13.3f} ms  "
              f"{flop / torch_form / 1e9:6.0f} {flop / kiln_form / 1e9:6.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
