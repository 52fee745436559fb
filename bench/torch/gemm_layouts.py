# A weight gradient in two layouts, timed with cuBLAS through PyTorch (TF32): a linear layer's
# dW = dy^T x as PyTorch computes it ([out, in], row-major), against (x^T dy)^T, the product
# kiln's autograd computes for the transposed weight view of `x @ W.t()` ([in, out]) and then
# transposes. Same FLOPs, the output's M and N swapped; cuBLAS picks other kernels for each. In
# both, the shared dim K (the tokens) is the outer dim of both stored operands; Hopper's TF32
# tensor-core instructions read both operands K-major, so a third column times the product on
# K-major copies (dy^T and x^T made contiguous) and the copies themselves.
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
    print(f"{'tokens x in x out':>22} {'dy^T x [out,in]':>16} {'x^T dy [in,out]':>16} {'K-major GEMM':>14} "
          f"{'its copies':>12}  TFLOP/s (the three GEMMs)")
    for t, i, o in SHAPES:
        x, dy = torch.randn(t, i, device="cuda"), torch.randn(t, o, device="cuda")
        torch_form = median_ms(lambda: dy.t() @ x)
        kiln_form = median_ms(lambda: x.t() @ dy)
        dy_k, x_k = dy.t().contiguous(), x.t().contiguous()  # [out, t], [in, t]: K innermost
        k_major = median_ms(lambda: dy_k @ x_k.t())
        copies = median_ms(lambda: (dy.t().contiguous(), x.t().contiguous()))
        flop = 2.0 * t * i * o
        rows.append({"tokens": t, "in": i, "out": o, "dyT_x_ms": torch_form, "xT_dy_ms": kiln_form,
                     "k_major_ms": k_major, "k_major_copies_ms": copies})
        print(f"{t:>8} x {i:>5} x {o:>5} {torch_form:13.3f} ms {kiln_form:13.3f} ms {k_major:11.3f} ms "
              f"{copies:9.3f} ms  {flop / torch_form / 1e9:6.0f} {flop / kiln_form / 1e9:6.0f} "
              f"{flop / k_major / 1e9:6.0f}")
    # The input gradient dx = dy W ([t, out] x [out, in]): W row-major has N (in) innermost, not K
    # (out); against W^T made contiguous ([in, out], K innermost) and that copy.
    print(f"\n{'tokens x in x out':>22} {'dy W':>16} {'K-major W':>14} {'its copy':>12}  TFLOP/s")
    for t, i, o in SHAPES:
        dy, w = torch.randn(t, o, device="cuda"), torch.randn(o, i, device="cuda")
        plain = median_ms(lambda: dy @ w)
        w_k = w.t().contiguous()
        k_major = median_ms(lambda: dy @ w_k.t())
        copy = median_ms(lambda: w.t().contiguous())
        flop = 2.0 * t * i * o
        rows.append({"tokens": t, "in": i, "out": o, "dy_w_ms": plain, "dy_w_k_major_ms": k_major,
                     "w_copy_ms": copy})
        print(f"{t:>8} x {i:>5} x {o:>5} {plain:13.3f} ms {k_major:11.3f} ms {copy:9.3f} ms  "
              f"{flop / plain / 1e9:6.0f} {flop / k_major / 1e9:6.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
