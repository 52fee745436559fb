# The PyTorch side of kiln's GPU benchmark: copy bandwidth, three memory-bound kernels (eager and
# torch.compile) and the zoo models (eager, torch.compile, max-autotune; a training step), timed
# on cuda the way kiln's bench times: warm-up, then many calls each between two CUDA events, the
# median reported. Full f32 (no TF32), as kiln computes by default.
#
#   python3 bench/torch/bench_torch.py --json torch.json [--models mlp,tiny_gpt] [--skip-max-autotune]
#
# bench/torch/merge_h200.py joins the JSON written here with kiln's; README.md lists the keys.
import argparse
import atexit
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time


def parse_args():
    p = argparse.ArgumentParser(description="PyTorch side of kiln's GPU benchmark (see bench/torch/README.md)")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--models", help="comma-separated zoo models (default: all)")
    p.add_argument("--skip-max-autotune", action="store_true", help="no max-autotune-no-cudagraphs compiles")
    p.add_argument("--skip-train", action="store_true", help="no training steps")
    p.add_argument("--skip-reduce-overhead", action="store_true",
                   help="no mode=\"reduce-overhead\" compiles (CUDA graphs), forward and training step")
    p.add_argument("--skip-kernels", action="store_true", help="no copy and kernel bandwidths")
    p.add_argument("--attention", choices=["mirror", "sdpa"], default="mirror",
                   help="the models' attention: kiln's chain op by op (default), or F.scaled_dot_product_attention")
    p.add_argument("--keep-cache", action="store_true",
                   help="use the usual Inductor/Triton caches instead of fresh empty ones")
    return p.parse_args()


def use_fresh_cache_dirs():
    """Empty Inductor and Triton cache folders for this run (read when torch is imported)."""
    root = tempfile.mkdtemp(prefix="bench_torch_cache_")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(root, "inductor")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(root, "triton")
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


# The cache folders must be chosen before torch is imported.
ARGS = parse_args() if __name__ == "__main__" else None
CACHE_ROOT = use_fresh_cache_dirs() if ARGS is not None and not ARGS.keep_cache else None

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import zoo  # noqa: E402  (bench/torch/zoo.py, beside this script)
import zoo_real  # noqa: E402  (its set_attention swaps in F.scaled_dot_product_attention)

ATTENTION = ARGS.attention if ARGS is not None else "mirror"


def make_model(name):
    """zoo.make_model(name, "cuda") with the attention --attention asks for."""
    model, make_inputs = zoo.make_model(name, "cuda")
    zoo_real.set_attention(model, ATTENTION)
    return model, make_inputs

WARMUP = 10          # calls before timing (after the compiling call for compiled functions)
MIN_ITERS = 50       # timed calls: at least this many ...
MIN_SECONDS = 0.5    # ... and at least this long,
MAX_ITERS = 5000     # but no more than this
COPY_BYTES = 256 * 2**20
POINTWISE_N = 64 * 2**20
ROWS, COLS = 8192, 4096


def log(*parts):
    print(*parts, flush=True)


# ---------------------------------------------------------------------------------------------
# Timing


def time_ms(fn):
    """Median ms of one call of fn: WARMUP calls, then calls each between two CUDA events."""
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    events = []
    start = time.perf_counter()
    while len(events) < MAX_ITERS and (len(events) < MIN_ITERS or time.perf_counter() - start < MIN_SECONDS):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        events.append((begin, end))
    torch.cuda.synchronize()
    ms = sorted(b.elapsed_time(e) for b, e in events)
    return ms[len(ms) // 2]


def first_call_s(fn):
    """Seconds of one synchronised call: for a fresh torch.compile, the cold compile and a run."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - start


def gbps(nbytes, ms):
    return nbytes / (ms * 1e-3) / 1e9


def fresh_compile_cache():
    """Inductor's own empty-cache context (in-memory caches cleared, new cache folders), so that
    each cold compile builds everything; a no-op with --keep-cache or when torch lacks it."""
    if ARGS is not None and ARGS.keep_cache:
        return contextlib.nullcontext()
    import torch._inductor.utils as inductor_utils
    fresh = getattr(inductor_utils, "fresh_cache", None) or getattr(inductor_utils, "fresh_inductor_cache", None)
    return fresh() if fresh is not None else contextlib.nullcontext()


def error_text(e):
    return f"{type(e).__name__}: {e}"[:2000]


def measure(row, label, keys, fn):
    """row.update(fn()); on an exception, the keys become None and the error is kept under label."""
    try:
        row.update(fn())
    except Exception as e:  # one failing model or mode must not end the run
        row.update({k: None for k in keys})
        row.setdefault("errors", {})[label] = error_text(e)
        log(f"    {label} failed: {error_text(e).splitlines()[0]}")
    finally:
        torch._dynamo.reset()


# ---------------------------------------------------------------------------------------------
# Setup


def configure_torch():
    torch.backends.cuda.matmul.allow_tf32 = False  # kiln computes in full f32 by default
    torch.backends.cudnn.allow_tf32 = False
    cfg = torch._dynamo.config
    for key in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                "accumulated_recompile_limit"):
        if hasattr(cfg, key):
            setattr(cfg, key, max(getattr(cfg, key), 256))


def warm_up_compiler():
    """One tiny compile, so that imports and the compile workers' start are not charged to the
    first model (kiln's bench builds its Halide runtime before the first model the same way)."""
    x = torch.ones(4, device="cuda")
    s = first_call_s(lambda: torch.compile(lambda t: t + 1)(x))
    torch._dynamo.reset()
    return s


# ---------------------------------------------------------------------------------------------
# Copy bandwidth and kernels


def bench_copy():
    src = torch.randn(COPY_BYTES // 4, device="cuda")
    dst = torch.empty_like(src)
    return gbps(2 * COPY_BYTES, time_ms(lambda: dst.copy_(src)))


def axpb(a, b):
    return a * 2 + b  # eagerly two kernels (5 passes over N); the bytes counted are the fused 3


def softmax_rows(x):
    return torch.softmax(x, -1)


def layernorm_rows(x, w, b):
    return F.layer_norm(x, (x.size(-1),), w, b, 1e-5)


def kernel_cases():
    """(name, shape, function, inputs, bytes read plus written)."""
    n, rows = POINTWISE_N, ROWS * COLS
    return [
        ("pointwise_axpb", [n], axpb, lambda: (torch.randn(n, device="cuda"), torch.randn(n, device="cuda")),
         3 * 4 * n),
        ("softmax_rows", [ROWS, COLS], softmax_rows, lambda: (torch.randn(ROWS, COLS, device="cuda"),), 2 * 4 * rows),
        ("layernorm_rows", [ROWS, COLS], layernorm_rows,
         lambda: (torch.randn(ROWS, COLS, device="cuda"), torch.randn(COLS, device="cuda"),
                  torch.randn(COLS, device="cuda")), 2 * 4 * rows),
    ]


KERNEL_KEYS = ["torch_eager_gbps", "torch_compile_gbps", "torch_compile_cold_s"]


def bench_kernel(name, shape, fn, make_inputs, nbytes):
    row = {"name": name, "shape": shape, "bytes": nbytes}
    inputs = make_inputs()

    def eager():
        return {"torch_eager_gbps": gbps(nbytes, time_ms(lambda: fn(*inputs)))}

    def compiled():
        with fresh_compile_cache():
            f = torch.compile(fn)
            cold = first_call_s(lambda: f(*inputs))
            return {"torch_compile_gbps": gbps(nbytes, time_ms(lambda: f(*inputs))), "torch_compile_cold_s": cold}

    measure(row, "torch_eager", ["torch_eager_gbps"], eager)
    measure(row, "torch_compile", ["torch_compile_gbps", "torch_compile_cold_s"], compiled)
    log(f"  {name:16s} eager {fmt(row['torch_eager_gbps'], 1):>8s} GB/s   compile {fmt(row['torch_compile_gbps'], 1):>8s} GB/s")
    return row


# ---------------------------------------------------------------------------------------------
# Models


def compiled_forward(model, inputs, mode, prefix):
    """{prefix_ms, prefix_cold_s} of torch.compile(model, mode) under no_grad, from an empty cache."""
    with fresh_compile_cache():
        f = torch.compile(model, mode=mode)
        cold = first_call_s(lambda: f(*inputs))
        return {f"{prefix}_ms": time_ms(lambda: f(*inputs)), f"{prefix}_cold_s": cold}


def train_step(forward, params, inputs, loss_fn):
    """One step: forward, scalar loss, backward, AdamW (PyTorch defaults, as kiln's), zero_grad."""
    opt = torch.optim.AdamW(params)

    def step():
        loss_fn(forward(*inputs)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def bench_training(name, compile_model, mode=None, prefix="torch_compile"):
    """Training step ms of a fresh copy of the model (train mode); compiled: the model's forward
    and backward through torch.compile(mode=mode), loss and AdamW step eager."""
    torch.manual_seed(0)
    model, make_inputs = make_model(name)
    model.train()
    inputs, loss_fn = make_inputs(), zoo.make_loss(name, "cuda")
    if not compile_model:
        return {"torch_eager_train_ms": time_ms(train_step(model, model.parameters(), inputs, loss_fn))}
    with fresh_compile_cache():
        step = train_step(torch.compile(model, mode=mode), model.parameters(), inputs, loss_fn)
        cold = first_call_s(step)
        return {f"{prefix}_train_ms": time_ms(step), f"{prefix}_train_cold_s": cold}


def bench_inference(row, name, args):
    """Eager, torch.compile and max-autotune forward ms (and cold compile s), under no_grad."""
    torch.manual_seed(0)
    model, make_inputs = make_model(name)
    inputs = make_inputs()
    row["inputs"] = [list(t.shape) for t in inputs]
    row["parameters"] = sum(p.numel() for p in model.parameters())
    with torch.no_grad():
        measure(row, "torch_eager", ["torch_eager_ms"],
                lambda: {"torch_eager_ms": time_ms(lambda: model(*inputs))})
        log(f"  {name}: eager {fmt(row['torch_eager_ms'], 3)} ms")
        measure(row, "torch_compile", ["torch_compile_ms", "torch_compile_cold_s"],
                lambda: compiled_forward(model, inputs, None, "torch_compile"))
        log(f"  {name}: compile {fmt(row['torch_compile_ms'], 3)} ms, cold {fmt(row['torch_compile_cold_s'], 2)} s")
        if not args.skip_reduce_overhead:
            measure(row, "torch_reduce_overhead", ["torch_reduce_overhead_ms", "torch_reduce_overhead_cold_s"],
                    lambda: compiled_forward(model, inputs, "reduce-overhead", "torch_reduce_overhead"))
            log(f"  {name}: reduce-overhead {fmt(row['torch_reduce_overhead_ms'], 3)} ms")
        if args.skip_max_autotune:
            row.update(torch_max_autotune_ms=None, torch_max_autotune_cold_s=None)
            return
        measure(row, "torch_max_autotune", ["torch_max_autotune_ms", "torch_max_autotune_cold_s"],
                lambda: compiled_forward(model, inputs, "max-autotune-no-cudagraphs", "torch_max_autotune"))
        log(f"  {name}: max-autotune {fmt(row['torch_max_autotune_ms'], 3)} ms, "
            f"cold {fmt(row['torch_max_autotune_cold_s'], 2)} s")


def bench_model(name, args):
    row = {"name": name}
    bench_inference(row, name, args)
    torch.cuda.empty_cache()
    if args.skip_train:
        row.update(torch_eager_train_ms=None, torch_compile_train_ms=None)
        return row
    measure(row, "torch_eager_train", ["torch_eager_train_ms"], lambda: bench_training(name, False))
    measure(row, "torch_compile_train", ["torch_compile_train_ms", "torch_compile_train_cold_s"],
            lambda: bench_training(name, True))
    log(f"  {name}: train eager {fmt(row['torch_eager_train_ms'], 3)} ms, "
        f"compile {fmt(row['torch_compile_train_ms'], 3)} ms")
    if not args.skip_reduce_overhead:
        measure(row, "torch_reduce_overhead_train",
                ["torch_reduce_overhead_train_ms", "torch_reduce_overhead_train_cold_s"],
                lambda: bench_training(name, True, "reduce-overhead", "torch_reduce_overhead"))
        log(f"  {name}: train reduce-overhead {fmt(row['torch_reduce_overhead_train_ms'], 3)} ms")
    return row


# ---------------------------------------------------------------------------------------------
# Report


def fmt(x, digits):
    return "-" if x is None else f"{x:.{digits}f}"


MODEL_COLUMNS = [("eager ms", "torch_eager_ms", 3), ("compile ms", "torch_compile_ms", 3),
                 ("cold s", "torch_compile_cold_s", 2), ("autotune ms", "torch_max_autotune_ms", 3),
                 ("cold s", "torch_max_autotune_cold_s", 2), ("train eager ms", "torch_eager_train_ms", 3),
                 ("train compile ms", "torch_compile_train_ms", 3),
                 ("r-o ms", "torch_reduce_overhead_ms", 3), ("train r-o ms", "torch_reduce_overhead_train_ms", 3)]


def print_report(report):
    log(f"\n{report['device']}, torch {report['torch_version']}, tf32 off")
    if report.get("copy_gbps") is not None:
        log(f"copy (256 MiB, read + write): {report['copy_gbps']:.1f} GB/s")
    if report["kernels"]:
        log(f"\n{'kernel':16s} {'shape':>14s} {'eager GB/s':>11s} {'compile GB/s':>13s}")
        for k in report["kernels"]:
            log(f"{k['name']:16s} {str(k['shape']):>14s} {fmt(k['torch_eager_gbps'], 1):>11s} "
                f"{fmt(k['torch_compile_gbps'], 1):>13s}")
    if report["models"]:
        log("\n" + f"{'model':18s}" + "".join(f" {title:>16s}" for title, _, _ in MODEL_COLUMNS))
        for m in report["models"]:
            log(f"{m['name']:18s}" + "".join(f" {fmt(m.get(key), d):>16s}" for _, key, d in MODEL_COLUMNS))
    for row in [report] + report["kernels"] + report["models"]:
        for label, text in row.get("errors", {}).items():
            log(f"error: {row.get('name', 'run')} {label}: {text.splitlines()[0] if text else ''}")


def write_json(path, report):
    if not path:
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def selected_models(args):
    if not args.models:
        return list(zoo.NAMES)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in zoo.NAMES]
    if unknown:
        sys.exit(f"bench_torch: unknown model(s) {', '.join(unknown)}; known: {', '.join(zoo.NAMES)}")
    return names


def main(args):
    if not torch.cuda.is_available():
        sys.exit("bench_torch: needs a CUDA device")
    names = selected_models(args)
    configure_torch()
    report = {"device": torch.cuda.get_device_name(), "torch_version": torch.__version__, "attention": ATTENTION,
              "cuda_version": torch.version.cuda, "tf32": False, "fresh_cache": CACHE_ROOT is not None,
              "timing": {"warmup": WARMUP, "min_iters": MIN_ITERS, "min_seconds": MIN_SECONDS,
                         "max_iters": MAX_ITERS, "statistic": "median of per-call CUDA event times"},
              "copy_gbps": None, "kernels": [], "models": []}
    log(f"bench_torch: {report['device']}, torch {report['torch_version']}, "
        f"caches {'fresh: ' + CACHE_ROOT if CACHE_ROOT else 'kept'}")
    measure(report, "compile_warmup", ["compile_warmup_s"], lambda: {"compile_warmup_s": warm_up_compiler()})
    log(f"compiler warm-up (imports, workers): {fmt(report['compile_warmup_s'], 2)} s")
    if not args.skip_kernels:
        measure(report, "copy", ["copy_gbps"], lambda: {"copy_gbps": bench_copy()})
        log(f"copy: {fmt(report['copy_gbps'], 1)} GB/s")
        for case in kernel_cases():
            row = {"name": case[0], "shape": case[1]}
            measure(row, "kernel", KERNEL_KEYS, lambda: bench_kernel(*case))
            report["kernels"].append(row)
            torch.cuda.empty_cache()
        write_json(args.json, report)
    for name in names:
        log(f"model {name}")
        row = {"name": name}
        measure(row, "model", [key for _, key, _ in MODEL_COLUMNS], lambda: bench_model(name, args))
        report["models"].append(row)
        torch.cuda.empty_cache()
        write_json(args.json, report)
    print_report(report)
    if args.json:
        write_json(args.json, report)
        log(f"wrote {args.json}")


if __name__ == "__main__":
    main(ARGS)
