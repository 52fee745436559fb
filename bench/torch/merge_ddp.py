# Merges `kiln bench ddp --json` and `bench/torch/ddp.py --json` from one machine into one table
# (markdown) and one JSON: per world size, all_reduce bus bandwidth per message size kiln against
# torch (issue 27 asks for >= 0.9x at 256 MB), and the DDP training step (ms, samples/s, scaling
# efficiency: samples/s on N processes over N times one process's) eager and compiled on both sides.
#
#   python3 bench/torch/merge_ddp.py --kiln kiln-ddp.json --torch torch-ddp.json \
#       --out ddp-DATE.json --table ddp-DATE.md
import argparse
import json


def parse_args():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--kiln", required=True, help="kiln bench ddp --json")
    p.add_argument("--torch", required=True, help="bench/torch/ddp.py --json")
    p.add_argument("--out", help="write the merged JSON here")
    p.add_argument("--table", help="write the markdown table here")
    return p.parse_args()


def by_world(report):
    return {int(r["world_size"]): r for r in report["runs"]}


def ratio(a, b):
    return a / b if a and b else None


def fmt(x, digits=2):
    return "-" if x is None else f"{x:.{digits}f}"


def main():
    args = parse_args()
    with open(args.kiln) as f:
        kiln = json.load(f)
    with open(args.torch) as f:
        torch = json.load(f)
    k_runs, t_runs = by_world(kiln), by_world(torch)
    worlds = sorted(set(k_runs) & set(t_runs))
    merged = {"suite": "ddp", "torch": torch.get("torch"), "engine": kiln.get("engine"), "all_reduce": [], "train_step": []}
    lines = ["all_reduce (f32, sum), bus bandwidth GB/s, kiln / torch:", "",
             "| bytes | " + " | ".join(f"n={w} kiln | n={w} torch | n={w} ratio" for w in worlds) + " |",
             "| --- |" + " --- | --- | --- |" * len(worlds)]
    sizes = [row["bytes"] for row in k_runs[worlds[0]]["all_reduce"]] if worlds else []
    for i, nbytes in enumerate(sizes):
        cells = []
        for w in worlds:
            k, t = k_runs[w]["all_reduce"][i], t_runs[w]["all_reduce"][i]
            assert k["bytes"] == t["bytes"] == nbytes, "the two benches measured different message sizes"
            r = ratio(k["busbw_gbps"], t["busbw_gbps"])
            merged["all_reduce"].append({"world_size": w, "bytes": nbytes, "kiln_ms": k["ms"], "torch_ms": t["ms"],
                                         "kiln_busbw_gbps": k["busbw_gbps"], "torch_busbw_gbps": t["busbw_gbps"],
                                         "busbw_ratio": r})
            cells += [fmt(k["busbw_gbps"], 1), fmt(t["busbw_gbps"], 1), fmt(r)]
        lines.append(f"| {nbytes} | " + " | ".join(cells) + " |")
    base_k, base_t = k_runs.get(1, {}).get("train_step"), t_runs.get(1, {}).get("train_step")
    lines += ["", "DDP training step (" + (base_k or {}).get("model", "?") + ", batch "
              + str((base_k or {}).get("batch_per_rank", "?")) + " per process):", "",
              "| processes | kiln eager ms | kiln compiled ms | torch eager ms | torch.compile ms "
              "| kiln compiled / torch.compile | scaling kiln compiled | scaling torch.compile |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for w in worlds:
        k, t = k_runs[w]["train_step"], t_runs[w]["train_step"]
        scale_k = ratio(k.get("compiled_samples_per_s"), w * base_k["compiled_samples_per_s"]) if base_k else None
        scale_t = (ratio(t.get("compiled_samples_per_s"), w * base_t["compiled_samples_per_s"])
                   if base_t and "compiled_samples_per_s" in base_t else None)
        row = {"world_size": w, "kiln_ms": k["ms"], "kiln_compiled_ms": k.get("compiled_ms"), "torch_ms": t["ms"],
               "kiln_plain_compiled_ms": k.get("plain_compiled_ms"), "torch_compiled_ms": t.get("compiled_ms"), "compiled_ratio": ratio(k.get("compiled_ms"), t.get("compiled_ms")),
               "kiln_compiled_scaling": scale_k, "torch_compiled_scaling": scale_t}
        merged["train_step"].append(row)
        lines.append(f"| {w} | {fmt(k['ms'])} | {fmt(k.get('compiled_ms'))} | {fmt(t['ms'])} | {fmt(t.get('compiled_ms'))} "
                     f"| {fmt(row['compiled_ratio'])} | {fmt(scale_k)} | {fmt(scale_t)} |")
    if base_k and "plain_compiled_ms" in base_k:
        lines += ["", f"kiln's compiled step without DDP, 1 process: {base_k['plain_compiled_ms']:.2f} ms "
                      f"(DDP's cost with nothing to exchange: {base_k['compiled_ms'] - base_k['plain_compiled_ms']:.2f} ms)"]
    table = "\n".join(lines) + "\n"
    print(table)
    if args.table:
        with open(args.table, "w") as f:
            f.write(table)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(merged, f, indent=1)


if __name__ == "__main__":
    main()
