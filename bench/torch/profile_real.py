# Where PyTorch's GPT-2 small training step (or inference) spends its device time, by the
# categories that `kiln bench gpu --size real` prints for kiln's compiled step (GEMMs, fused
# attention, generated kernels, other kernels, copies), so the two can be read side by side:
#
#   python3 bench/torch/profile_real.py [--attention sdpa|mirror] [--eager] [--inference]
#       [--precision tf32|bf16] [--json FILE]
#
# The step is bench_real.py's (torch.compile(model), the loss, backward, fused AdamW; with
# --inference the forward under no_grad, as bench_real.py times it; with --precision bf16 under
# bf16 autocast, as bench_real.py --precision bf16), warmed up, then STEPS steps
# under torch.profiler; the device time of each kernel is summed by category and
# divided by STEPS. A kernel's category comes from its name (NAME_RULES below, first match wins).
import argparse
import json
import sys

import torch
from torch.profiler import ProfilerActivity, profile

import bench_real
import zoo_real

STEPS = 5
WARMUP = 3

# (category, any of these substrings in the kernel's lowercased name); first match wins.
NAME_RULES = [
    ("attention", ["fmha", "flash", "attention", "efficient_attention"]),
    ("gemm", ["gemm", "nvjet", "cutlass", "xmma", "sm90_", "sm80_", "cublas", "splitk"]),
    ("generated", ["triton_"]),
    ("optimizer", ["adam"]),
    ("copy", ["memcpy", "memset", "copy"]),
]


def category(name):
    low = name.lower()
    for cat, keys in NAME_RULES:
        if any(k in low for k in keys):
            return cat
    return "other"


def profile_step(attention, compiled, inference):
    model, make_inputs = zoo_real.make_model("gpt2_small", "cuda", attention)
    inputs = make_inputs()
    forward = torch.compile(model) if compiled else model
    if inference:
        def step():
            with torch.no_grad(), bench_real.autocast():
                forward(*inputs)
    else:
        model.train()
        step = bench_real.train_step(forward, model, inputs, zoo_real.make_loss("gpt2_small", "cuda"))
    for _ in range(WARMUP):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        for _ in range(STEPS):
            step()
        torch.cuda.synchronize()
    by_cat, by_kernel = {}, {}
    for e in prof.events():
        # Kernels and copies only: a user annotation on the GPU timeline (fused AdamW's
        # "Optimizer.step#AdamW.step") spans kernels that are counted themselves.
        if e.device_type != torch.autograd.DeviceType.CUDA or getattr(e, "is_user_annotation", False) \
                or e.name.startswith("Optimizer."):
            continue
        us = e.device_time if hasattr(e, "device_time") else e.cuda_time
        by_cat[category(e.name)] = by_cat.get(category(e.name), 0.0) + us / 1e3 / STEPS
        calls, total = by_kernel.get(e.name, (0, 0.0))
        by_kernel[e.name] = (calls + 1, total + us / 1e3 / STEPS)
    return by_cat, by_kernel


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--attention", default="mirror", choices=["sdpa", "mirror"])
    p.add_argument("--eager", action="store_true", help="profile the eager step, not torch.compile's")
    p.add_argument("--inference", action="store_true", help="profile the forward under no_grad, not the training step")
    p.add_argument("--json", help="write the categories and the costliest kernels here")
    p.add_argument("--precision", default="tf32", choices=["tf32", "bf16"],
                   help="f32 with TF32 matmuls, or the forward and loss under bf16 autocast")
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args()
    bench_real.ARGS = args  # bench_real.autocast() reads the precision from it
    if not torch.cuda.is_available():
        sys.exit("profile_real: needs a CUDA device")
    bench_real.configure_torch()
    by_cat, by_kernel = profile_step(args.attention, not args.eager, args.inference)
    what = (f"gpt2_small {'inference' if args.inference else 'train step'}, "
            f"{'eager' if args.eager else 'torch.compile'}, {args.attention} attention, {args.precision}")
    total = sum(by_cat.values())
    print(f"{what}: device time by category per step (of {total:.2f} ms of kernels):")
    for cat, ms in sorted(by_cat.items(), key=lambda kv: -kv[1]):
        print(f"  {cat:12s} {ms:8.2f} ms")
    print(f"the {args.top} costliest kernels (ms per step, calls per step):")
    top = sorted(by_kernel.items(), key=lambda kv: -kv[1][1])[:args.top]
    for name, (calls, ms) in top:
        print(f"  {ms:8.3f} ms {calls / STEPS:6.1f}x  {category(name):10s} {name[:110]}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"what": what, "torch": torch.__version__, "device": torch.cuda.get_device_name(),
                       "categories_ms": by_cat,
                       "kernels": [{"name": n, "calls_per_step": c / STEPS, "ms_per_step": ms}
                                   for n, (c, ms) in top]}, f, indent=1)


if __name__ == "__main__":
    main()
