# torch.distributed's side of `kiln bench ddp`: the same measurements by the same method, with
# PyTorch's DistributedDataParallel as its users run it. On one process and on N (one GPU each,
# NCCL; or CPU processes over Gloo with --cpu):
#   - all_reduce (f32, sum) per message size, 4 KB to 256 MB (64 MB on the CPU) by factors of 4:
#     2 warm-up calls, then 7 samples of a fixed number of calls (64 MB / size, 1 to 50) each,
#     synchronised; the median per call; bus bandwidth as NCCL's tests report it (the algorithm
#     bandwidth times 2(n-1)/n);
#   - a DDP training step (forward, loss, backward, AdamW(fused=True on CUDA), zero_grad):
#     GPT-2 small at real size (zoo_real.py, F.scaled_dot_product_attention, TF32 allowed) on
#     CUDA, zoo.py's MLP at bench size on the CPU; the same batch per rank; DDP with
#     bucket_cap_mb=25 and gradient_as_bucket_view=True; the median of 15 synchronised steps after
#     2 warm-ups; then the same under torch.compile (DDPOptimizer splits the graph at bucket
#     boundaries), unless --skip-compile.
# The JSON has kiln's layout ({"suite": "ddp", "runs": [{"world_size", "all_reduce", "train_step"}]}),
# so the two files compare row by row.
#
#   python3 bench/torch/ddp.py --nproc 8 --json torch-ddp.json          # on a machine with 8 GPUs
#   python3 bench/torch/ddp.py --nproc 2 --cpu --json torch-ddp-cpu.json
import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo  # noqa: E402  bench/torch/zoo.py
import zoo_real  # noqa: E402  bench/torch/zoo_real.py


def parse_args():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--nproc", type=int, default=torch.cuda.device_count() or 2,
                   help="processes of the second run (the first has one); default: the GPU count")
    p.add_argument("--cpu", action="store_true", help="CPU processes over Gloo instead of GPUs over NCCL")
    p.add_argument("--skip-compile", action="store_true", help="no torch.compile step")
    p.add_argument("--json", default="", help="write the report here")
    return p.parse_args()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def median_per_call(fn, sync, iterations, samples):
    for _ in range(2):
        fn()
    sync()
    times = []
    for _ in range(samples):
        t0 = time.perf_counter()
        for _ in range(iterations):
            fn()
        sync()
        times.append((time.perf_counter() - t0) / iterations)
    return statistics.median(times)


def worker(rank, world, port, cpu, skip_compile, part_path):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    device = torch.device("cpu") if cpu else torch.device("cuda", rank)
    if not cpu:
        torch.cuda.set_device(device)
    dist.init_process_group("gloo" if cpu else "nccl", rank=rank, world_size=world,
                            **({} if cpu else {"device_id": device}))
    sync = (lambda: None) if cpu else torch.cuda.synchronize
    part = {"world_size": world, "all_reduce": []}
    max_bytes = (64 if cpu else 256) << 20
    nbytes = 4096
    while nbytes <= max_bytes:
        t = torch.randn(nbytes // 4, device=device)
        iterations = max(1, min(50, (64 << 20) // nbytes))
        s = median_per_call(lambda: dist.all_reduce(t), sync, iterations, 7)
        algbw = nbytes / s / 1e9
        part["all_reduce"].append({"bytes": nbytes, "ms": s * 1e3, "algbw_gbps": algbw,
                                   "busbw_gbps": algbw * 2 * (world - 1) / world})
        nbytes *= 4

    if not cpu:
        torch.set_float32_matmul_precision("high")  # TF32, as kiln's bench
    name = "mlp" if cpu else "gpt2_small"
    torch.manual_seed(1234)
    module, make_inputs = (zoo.make_model(name, device) if cpu else zoo_real.make_model(name, device))
    module.train()
    loss_fn = zoo.make_loss(name, device) if cpu else zoo_real.make_loss(name, device)
    model = torch.nn.parallel.DistributedDataParallel(module, device_ids=None if cpu else [rank],
                                                      bucket_cap_mb=25, gradient_as_bucket_view=True)
    opt = torch.optim.AdamW(model.parameters(), fused=not cpu)
    inputs = make_inputs()

    def step_of(forward):
        def step():
            loss = loss_fn(forward(*inputs))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step

    step_s = median_per_call(step_of(model), sync, 1, 15)
    samples = inputs[0].shape[0]
    train = {"model": name, "batch_per_rank": samples, "ms": step_s * 1e3,
             "samples_per_s": samples * world / step_s}
    if not skip_compile:
        compiled = torch.compile(model)
        t0 = time.perf_counter()
        step_of(compiled)()
        sync()
        train["compile_s"] = time.perf_counter() - t0
        compiled_s = median_per_call(step_of(compiled), sync, 1, 15)
        train.update(compiled_ms=compiled_s * 1e3, compiled_samples_per_s=samples * world / compiled_s)
    part["train_step"] = train
    if rank == 0:
        with open(part_path, "w") as f:
            json.dump(part, f)
    dist.barrier()
    dist.destroy_process_group()


def main():
    args = parse_args()
    if not args.cpu and torch.cuda.device_count() < args.nproc:
        sys.exit(f"ddp.py: --nproc {args.nproc} needs {args.nproc} GPUs; this machine has {torch.cuda.device_count()}")
    report = {"suite": "ddp", "device": "cpu" if args.cpu else "cuda", "engine": "gloo" if args.cpu else "nccl",
              "torch": torch.__version__, "runs": []}
    for world in sorted({1, args.nproc}):
        print(f"torch ddp: {world} process{'' if world == 1 else 'es'} on {'cpu' if args.cpu else 'cuda'}", flush=True)
        with tempfile.TemporaryDirectory() as d:
            part = os.path.join(d, "part.json")
            mp.spawn(worker, args=(world, free_port(), args.cpu, args.skip_compile, part), nprocs=world, join=True)
            with open(part) as f:
                report["runs"].append(json.load(f))
    one = report["runs"][0]
    print("\nall_reduce (f32, sum), median per call:")
    for i, row in enumerate(one["all_reduce"]):
        cells = "  ".join(f"n={r['world_size']}: {r['all_reduce'][i]['ms']:9.4f} ms {r['all_reduce'][i]['busbw_gbps']:8.2f} GB/s"
                          for r in report["runs"])
        print(f"{row['bytes']:>12}  {cells}")
    base = one["train_step"]
    print(f"\n{base['model']} DDP training step, batch {base['batch_per_rank']} per process:")
    for r in report["runs"]:
        s, n = r["train_step"], r["world_size"]
        line = (f"  {n:2d} process{'  ' if n == 1 else 'es'}: {s['ms']:8.2f} ms, {s['samples_per_s']:10.1f} samples/s, "
                f"scaling {s['samples_per_s'] / (n * base['samples_per_s']):.2f}")
        if "compiled_ms" in s:
            line += (f" | torch.compile {s['compiled_ms']:8.2f} ms, scaling "
                     f"{s['compiled_samples_per_s'] / (n * base['compiled_samples_per_s']):.2f}")
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
