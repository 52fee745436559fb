# Joins kiln's GPU benchmark JSON with bench_torch.py's into one results file, checks the GPU
# goals (bandwidth against copy, kiln compiled against torch.compile and against kiln eager,
# host overhead) and prints the three tables as Markdown. Plain Python, no torch needed.
#
#   python3 bench/torch/merge_h200.py --kiln kiln.json --torch torch.json \
#       --out bench/results/h200-YYYY-MM-DD.json [--table OUT.md]
#
# Any value either side lacks becomes null, and a goal that needs it has met: null.
import argparse
import datetime
import json
import os

KERNEL_ORDER = ["pointwise_axpb", "softmax_rows", "layernorm_rows"]
MODEL_ORDER = ["mlp", "transformer_block", "norm_softmax", "tiny_gpt"]
KERNEL_TARGETS = {"pointwise_axpb": 0.90, "softmax_rows": 0.80, "layernorm_rows": 0.80}  # of copy
MODEL_KEYS = ["kiln_eager_ms", "kiln_compiled_ms", "kiln_compile_cold_s", "torch_eager_ms", "torch_compile_ms",
              "torch_compile_cold_s"]
HOST_OVERHEAD_TARGET_US = 10.0


def load(path):
    with open(path) as f:
        return json.load(f)


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def by_name(rows):
    return {r["name"]: r for r in rows or [] if isinstance(r, dict) and "name" in r}


def ordered_names(order, *tables):
    """Every name of order (a missing one is a missing measurement), then any others."""
    names = set().union(*(t.keys() for t in tables))
    return list(order) + sorted(names - set(order))


def merge_kernels(kiln, torch, copy_gbps):
    k, t = by_name(kiln.get("kernels")), by_name(torch.get("kernels"))
    rows = []
    for name in ordered_names(KERNEL_ORDER, k, t):
        kr, tr = k.get(name, {}), t.get(name, {})
        row = {"name": name, "shape": kr.get("shape", tr.get("shape")), "kiln_gbps": kr.get("kiln_gbps"),
               "torch_compile_gbps": tr.get("torch_compile_gbps"), "torch_eager_gbps": tr.get("torch_eager_gbps")}
        row["fraction_of_copy"] = ratio(row["kiln_gbps"], copy_gbps)
        row["torch_compile_fraction_of_copy"] = ratio(row["torch_compile_gbps"], copy_gbps)
        row.update({key: v for key, v in kr.items() if key not in row})
        row.update({key: v for key, v in tr.items() if key not in row and key != "errors"})
        if tr.get("errors"):
            row["torch_errors"] = tr["errors"]
        rows.append(row)
    return rows


def merge_models(kiln, torch):
    k, t = by_name(kiln.get("models")), by_name(torch.get("models"))
    rows = []
    for name in ordered_names(MODEL_ORDER, k, t):
        kr, tr = k.get(name, {}), t.get(name, {})
        row = {"name": name}
        row.update({key: kr.get(key, tr.get(key)) for key in MODEL_KEYS})
        row.update({key: v for key, v in kr.items() if key not in row})
        row.update({key: v for key, v in tr.items() if key not in row and key != "errors"})
        if tr.get("errors"):
            row["torch_errors"] = tr["errors"]
        row["kiln_compiled_over_torch_compile"] = ratio(row["kiln_compiled_ms"], row["torch_compile_ms"])
        row["kiln_compiled_over_kiln_eager"] = ratio(row["kiln_compiled_ms"], row["kiln_eager_ms"])
        row["kiln_compiled_train_over_torch_compile_train"] = ratio(row.get("kiln_compiled_train_ms"),
                                                                    row.get("torch_compile_train_ms"))
        rows.append(row)
    return rows


def goal(name, measured, comparison, target, **where):
    met = None
    if measured is not None:
        met = measured >= target if comparison == ">=" else measured <= target
    return {"goal": name, **where, "measured": measured, "comparison": comparison, "target": target, "met": met}


def goals(report, kiln):
    out = []
    kernels = by_name(report["kernels"])
    for name, target in KERNEL_TARGETS.items():
        fraction = kernels.get(name, {}).get("fraction_of_copy")
        out.append(goal(f"{name}: kiln GB/s / copy GB/s", fraction, ">=", target, kernel=name))
    for m in report["models"]:
        out.append(goal("kiln compiled ms / torch.compile ms", m["kiln_compiled_over_torch_compile"], "<=", 1.0,
                        model=m["name"]))
        out.append(goal("kiln compiled ms / kiln eager ms", m["kiln_compiled_over_kiln_eager"], "<=", 0.5,
                        model=m["name"]))
    for m in report["models"]:
        if m.get("kiln_compiled_train_ms") is not None:
            out.append(goal("kiln compiled train step ms (AdamW in the graph) / torch.compile train step ms "
                            "(AdamW eager)",
                            m["kiln_compiled_train_over_torch_compile_train"], "<=", 1.0, model=m["name"]))
    out.append(goal("host overhead of a compiled call, us", kiln.get("host_overhead_us"), "<=",
                    HOST_OVERHEAD_TARGET_US))
    for m in report["models"]:
        if m.get("kiln_host_overhead_us") is not None:
            out.append(goal("host overhead of a compiled call, us", m["kiln_host_overhead_us"], "<=",
                            HOST_OVERHEAD_TARGET_US, model=m["name"]))
    return out


def merge(kiln, torch, sources):
    # copy_gbps is kiln's measurement; torch's stands in only when kiln's is missing.
    copy_gbps, copy_source = kiln.get("copy_gbps"), "kiln"
    if copy_gbps is None:
        copy_gbps = torch.get("copy_gbps")
        copy_source = "torch" if copy_gbps is not None else None
    report = {
        "device": kiln.get("device", torch.get("device")),
        "torch_device": torch.get("device"),
        "date": datetime.date.today().isoformat(),
        "sources": sources,
        "torch_version": torch.get("torch_version"),
        "tf32": torch.get("tf32"),
        "copy_gbps": copy_gbps,
        "copy_gbps_from": copy_source,
        "torch_copy_gbps": torch.get("copy_gbps"),
        "host_overhead_us": kiln.get("host_overhead_us"),
    }
    report["kernels"] = merge_kernels(kiln, torch, copy_gbps)
    report["models"] = merge_models(kiln, torch)
    report["goals"] = goals(report, kiln)
    return report


# ---------------------------------------------------------------------------------------------
# Markdown


def cell(x, digits=2):
    if x is None:
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, (int, float)):
        return f"{x:.{digits}f}"
    return str(x)


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def kernel_table(report):
    header = ["kernel", "shape", "kiln GB/s", "torch.compile GB/s", "torch eager GB/s", "kiln / copy"]
    rows = [[k["name"], cell(k["shape"]), cell(k["kiln_gbps"], 1), cell(k["torch_compile_gbps"], 1),
             cell(k["torch_eager_gbps"], 1), cell(k["fraction_of_copy"], 3)] for k in report["kernels"]]
    return table(header, rows)


MODEL_COLUMNS = [("kiln eager ms", "kiln_eager_ms", 3), ("kiln compiled ms", "kiln_compiled_ms", 3),
                 ("kiln cold s", "kiln_compile_cold_s", 2), ("torch eager ms", "torch_eager_ms", 3),
                 ("torch.compile ms", "torch_compile_ms", 3), ("torch cold s", "torch_compile_cold_s", 2),
                 ("max-autotune ms", "torch_max_autotune_ms", 3), ("max-autotune cold s", "torch_max_autotune_cold_s", 2),
                 ("kiln eager train ms", "kiln_eager_train_ms", 3), ("kiln compiled train ms", "kiln_compiled_train_ms", 3),
                 ("torch eager train ms", "torch_eager_train_ms", 3),
                 ("torch.compile train ms", "torch_compile_train_ms", 3)]


def model_table(report):
    # Columns that no model has a value for are left out (the first six always stay).
    columns = [c for i, c in enumerate(MODEL_COLUMNS)
               if i < 6 or any(m.get(c[1]) is not None for m in report["models"])]
    rows = [[m["name"]] + [cell(m.get(key), d) for _, key, d in columns] for m in report["models"]]
    return table(["model"] + [title for title, _, _ in columns], rows)


def goal_table(report):
    rows = []
    for g in report["goals"]:
        subject = g.get("kernel") or g.get("model") or "all"
        rows.append([g["goal"], subject, f"{g['comparison']} {cell(g['target'])}", cell(g["measured"], 3),
                     cell(g["met"]) if g["met"] is not None else "—"])
    return table(["goal", "on", "target", "measured", "met"], rows)


def markdown(report):
    copy = cell(report["copy_gbps"], 1)
    head = (f"{cell(report['device'])}; copy {copy} GB/s (from {report['copy_gbps_from'] or 'neither'}; "
            f"torch's copy {cell(report['torch_copy_gbps'], 1)} GB/s); torch {cell(report['torch_version'])}, "
            f"tf32 {cell(report['tf32'])}")
    return "\n\n".join([head, "### Kernels", kernel_table(report), "### Models", model_table(report),
                        "### Goals", goal_table(report)]) + "\n"


def main():
    p = argparse.ArgumentParser(description="merge kiln's and PyTorch's H200 benchmark JSON")
    p.add_argument("--kiln", required=True, help="JSON written by kiln's GPU bench")
    p.add_argument("--torch", required=True, help="JSON written by bench/torch/bench_torch.py")
    p.add_argument("--out", required=True, help="merged JSON, e.g. bench/results/h200-YYYY-MM-DD.json")
    p.add_argument("--table", help="also write the Markdown tables here")
    args = p.parse_args()
    # File names only: the folder is the machine's own business.
    report = merge(load(args.kiln), load(args.torch),
                   {"kiln": os.path.basename(args.kiln), "torch": os.path.basename(args.torch)})
    with open(args.out + ".tmp", "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    os.replace(args.out + ".tmp", args.out)
    text = markdown(report)
    print(text, end="")
    if args.table:
        with open(args.table, "w") as f:
            f.write(text)
    print(f"\nwrote {args.out}" + (f" and {args.table}" if args.table else ""))


if __name__ == "__main__":
    main()
