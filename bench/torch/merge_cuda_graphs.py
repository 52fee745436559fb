# Joins `kiln bench gpu --only models` (bench-size zoo, with its CUDA-graph columns) with
# bench_torch.py's models (run with --attention sdpa) into the "cuda_graphs" list of a results
# file, checks the CUDA-graph goals and prints the table as Markdown. Plain Python, no torch needed.
#
#   python3 bench/torch/merge_cuda_graphs.py --kiln kiln_gpu.json --torch torch_sdpa.json \
#       --out bench/results/h200-real-YYYY-MM-DD.json [--table OUT.md]
#
# --out is merged into: an existing file keeps its other keys. Goals: tiny_gpt's replayed forward
# and training step at most 0.7x torch's reduce-overhead; every model's replayed forward and
# training step at most 1.0x. A value either side lacks is null, and a goal that needs it has
# met: null.
import argparse
import json
import os

from merge_h200 import load, ratio

MODEL_ORDER = ["mlp", "transformer_block", "norm_softmax", "tiny_gpt"]
GOALS = {"tiny_gpt": 0.7}  # kiln replayed / torch reduce-overhead; every other model 1.0
DEFAULT_GOAL = 1.0


def rows(kiln, torch):
    k = {m["name"]: m for m in kiln.get("models", [])}
    t = {m["name"]: m for m in torch.get("models", [])}
    names = MODEL_ORDER + sorted((set(k) | set(t)) - set(MODEL_ORDER))
    out = []
    for name in names:
        km, tm = k.get(name, {}), t.get(name, {})
        for what, kc, kg, tc, tr in [
            ("infer", "kiln_compiled_ms", "kiln_graphs_ms", "torch_compile_ms", "torch_reduce_overhead_ms"),
            ("train", "kiln_compiled_train_ms", "kiln_graphs_train_ms", "torch_compile_train_ms",
             "torch_reduce_overhead_train_ms"),
        ]:
            row = {"name": name, "what": what, "kiln_ms": km.get(kc), "kiln_graphs_ms": km.get(kg),
                   "torch_compile_ms": tm.get(tc), "torch_reduce_overhead_ms": tm.get(tr)}
            r = ratio(row["kiln_graphs_ms"], row["torch_reduce_overhead_ms"])
            goal = GOALS.get(name, DEFAULT_GOAL)
            row["graphs_over_reduce_overhead"] = r
            row["goal"] = goal
            row["met"] = None if r is None else r <= goal
            out.append(row)
    return out


def fmt(v, digits=3):
    return "-" if v is None else f"{v:.{digits}f}"


def table(cuda_graphs):
    lines = ["| model | what | kiln compiled ms | kiln graphs ms | torch.compile ms | torch reduce-overhead ms | "
             "kiln graphs / torch r-o | goal |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in cuda_graphs:
        met = {True: "met", False: "not met", None: "-"}[r["met"]]
        lines.append(f"| {r['name']} | {r['what']} | {fmt(r['kiln_ms'])} | {fmt(r['kiln_graphs_ms'])} | "
                     f"{fmt(r['torch_compile_ms'])} | {fmt(r['torch_reduce_overhead_ms'])} | "
                     f"{fmt(r['graphs_over_reduce_overhead'], 2)} | <= {r['goal']} {met} |")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--kiln", required=True, help="kiln bench gpu --only models --json output")
    p.add_argument("--torch", required=True, help="bench_torch.py --attention sdpa --json output")
    p.add_argument("--out", required=True, help="results file to write (merged into if it exists)")
    p.add_argument("--table", help="write the Markdown table here too")
    args = p.parse_args()
    kiln, torch = load(args.kiln), load(args.torch)
    if torch.get("attention") not in (None, "sdpa"):
        raise SystemExit(f"merge_cuda_graphs: torch side ran --attention {torch.get('attention')}; the goals are "
                         "against the model as PyTorch users write it (--attention sdpa)")
    result = load(args.out) if os.path.exists(args.out) else {}
    result["cuda_graphs"] = rows(kiln, torch)
    result["cuda_graphs_devices"] = {"kiln": kiln.get("device"), "torch": torch.get("device")}
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, args.out)
    md = table(result["cuda_graphs"])
    print(md, end="")
    if args.table:
        with open(args.table, "w") as f:
            f.write(md)


if __name__ == "__main__":
    main()
