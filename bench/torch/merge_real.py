# Joins the JSON of kiln's real-size GPU benchmark (`kiln bench gpu --size real`) with
# bench_real.py's into one results file, checks the real-size goals (GPT-2 small against
# torch.compile and PyTorch eager, kernel bandwidth against copy and against torch.compile,
# compile time, peak memory, the correctness check) and writes the tables as Markdown. Plain
# Python, no torch needed.
#
#   python3 bench/torch/merge_real.py --kiln kiln-real.json --torch torch-real.json \
#       --out h200-real-YYYY-MM-DD.json [--table h200-real-YYYY-MM-DD.md]
#
# Kernels are joined by name, models by name and precision (a row without one is "tf32"), attention
# rows by shape, dtype, mask and pass. Every
# key of either side is kept; a value either side lacks is null, and a goal that needs it has
# met: null.
import argparse
import datetime
import json
import math
import os
import sys

MODEL_ORDER = ["gpt2_small", "mlp", "transformer_block"]
DEFAULT_PRECISION = "tf32"
KERNEL_ORDER = ["pointwise_axpb", "adamw_update", "softmax_rows_64", "softmax_rows_1024", "softmax_rows",
                "softmax_rows_50304", "log_softmax_rows_50304", "layernorm_rows_768", "layernorm_rows",
                "logsumexp_rows_50304", "cross_entropy_50304", "softmax_bwd_rows_50304",
                "log_softmax_bwd_rows_50304", "layernorm_bwd_rows", "cross_entropy_bwd_50304", "column_sum",
                "full_sum", "embedding_50304", "embedding_bwd_50304", "transpose_copy", "permute_heads"]
MODEL_KEYS = ["name", "precision", "kiln_eager_ms", "kiln_compiled_ms", "torch_eager_ms", "torch_compile_ms",
              "kiln_eager_train_ms", "kiln_compiled_train_ms", "torch_eager_train_ms", "torch_compile_train_ms",
              "kiln_compile_cold_s", "kiln_compile_warm_s", "torch_compile_cold_s", "kiln_peak_gb", "torch_peak_gb"]
KERNEL_KEYS = ["name", "shape", "kiln_gbps", "kiln_eager_gbps", "torch_compile_gbps", "torch_eager_gbps",
               "fraction_of_copy"]
# (key, numerator, denominator) of each model's ratios.
MODEL_RATIOS = [
    ("kiln_eager_over_torch_eager", "kiln_eager_ms", "torch_eager_ms"),
    ("kiln_compiled_over_torch_compile", "kiln_compiled_ms", "torch_compile_ms"),
    ("kiln_eager_train_over_torch_eager_train", "kiln_eager_train_ms", "torch_eager_train_ms"),
    ("kiln_compiled_train_over_torch_compile_train", "kiln_compiled_train_ms", "torch_compile_train_ms"),
    ("kiln_eager_over_torch_mirror_eager", "kiln_eager_ms", "torch_mirror_eager_ms"),
    ("kiln_compiled_over_torch_mirror_compile", "kiln_compiled_ms", "torch_mirror_compile_ms"),
    ("kiln_eager_train_over_torch_mirror_eager_train", "kiln_eager_train_ms", "torch_mirror_eager_train_ms"),
    ("kiln_compiled_train_over_torch_mirror_compile_train", "kiln_compiled_train_ms",
     "torch_mirror_compile_train_ms"),
    ("kiln_peak_over_torch_peak", "kiln_peak_gb", "torch_peak_gb"),
    ("kiln_peak_over_torch_mirror_peak", "kiln_peak_gb", "torch_mirror_peak_gb"),
]
# kiln's compile time of the training step: the first of these keys that has a value.
KILN_COLD_KEYS = ["kiln_compile_train_cold_s", "kiln_compile_train_s", "kiln_compile_cold_s"]
KILN_WARM_KEYS = ["kiln_compile_train_warm_s", "kiln_compile_warm_s"]
GOAL_MODEL = "gpt2_small"
CHECK_BOUND = 1e-3


def load(path):
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"merge_real: cannot read {path}: {e}")
    return data if isinstance(data, dict) else {}


def number(x):
    """x when it is a finite number (not a bool), else None."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return x


def ratio(a, b):
    a, b = number(a), number(b)
    return a / b if a is not None and b not in (None, 0) else None


def dict_list(rows):
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def dict_rows(rows):
    return [r for r in dict_list(rows) if isinstance(r.get("name"), str)]


def precision_of(row, side):
    p = row.get("precision", side.get("precision"))
    return p.lower() if isinstance(p, str) and p else DEFAULT_PRECISION


def keyed(rows, key):
    """{key(row): row} in the rows' order, the first row of a key winning."""
    out = {}
    for r in rows:
        out.setdefault(key(r), r)
    return out


def join_order(known, *tables):
    """Every known key (a missing one is a missing measurement), then the others as they come."""
    order = list(known)
    for t in tables:
        order += [k for k in t if k not in order]
    return order


def torch_side(key):
    return key if key.startswith("torch_") else "torch_" + key


def join_row(kr, tr, first_keys, fixed):
    """first_keys in order (torch_* keys from torch's row, the others from kiln's, the other side
    standing in), then kiln's other keys, then torch's; a torch value that differs from kiln's
    under one key goes under torch_<key>. torch's errors go under torch_errors."""
    row = {}
    for k in first_keys:
        a, b = (tr, kr) if k.startswith("torch_") else (kr, tr)
        row[k] = a[k] if k in a else b.get(k)
    row.update(fixed)
    for k, v in kr.items():
        row.setdefault(k, v)
    for k, v in tr.items():
        if k == "errors":
            row["torch_errors"] = v
        elif k not in row:
            row[k] = v
        elif k not in fixed and not k.startswith("torch_") and k in kr and kr[k] != v:
            row.setdefault(torch_side(k), v)
    return row


def merge_models(kiln, torch):
    key = lambda side: lambda r: (r["name"], precision_of(r, side))  # noqa: E731
    k = keyed(dict_rows(kiln.get("models")), key(kiln))
    t = keyed(dict_rows(torch.get("models")), key(torch))
    rows = []
    for name, precision in join_order([(n, DEFAULT_PRECISION) for n in MODEL_ORDER], k, t):
        row = join_row(k.get((name, precision), {}), t.get((name, precision), {}), MODEL_KEYS,
                       {"name": name, "precision": precision})
        row.update({r: ratio(row.get(a), row.get(b)) for r, a, b in MODEL_RATIOS})
        rows.append(row)
    return rows


def merge_kernels(kiln, torch, copy_gbps):
    k = keyed(dict_rows(kiln.get("kernels")), lambda r: r["name"])
    t = keyed(dict_rows(torch.get("kernels")), lambda r: r["name"])
    rows = []
    for name in join_order(KERNEL_ORDER, k, t):
        row = join_row(k.get(name, {}), t.get(name, {}), KERNEL_KEYS, {"name": name})
        fraction = ratio(row["kiln_gbps"], copy_gbps)
        row["fraction_of_copy"] = fraction if fraction is not None else number(row["fraction_of_copy"])
        row["kiln_over_torch_compile"] = ratio(row["kiln_gbps"], row["torch_compile_gbps"])
        row["torch_compile_fraction_of_copy"] = ratio(row["torch_compile_gbps"], copy_gbps)
        rows.append(row)
    return rows


def merge_attention(kiln, torch):
    """kiln's and torch's attention rows joined by shape, dtype, mask and pass."""
    def key(r):
        return (tuple(r.get("shape", [])), r.get("dtype"), bool(r.get("causal")), r.get("pass"))
    k = {key(r): r for r in dict_list(kiln.get("attention"))}
    t = {key(r): r for r in dict_list(torch.get("attention"))}
    rows = []
    for kk in list(k) + [x for x in t if x not in k]:
        kr, tr = k.get(kk, {}), t.get(kk, {})
        row = {"shape": list(kk[0]), "dtype": kk[1], "causal": kk[2], "pass": kk[3],
               "kiln_ms": number(kr.get("kiln_ms")), "kiln_tflops": number(kr.get("kiln_tflops")),
               "torch_sdpa_ms": number(tr.get("torch_sdpa_ms")), "torch_sdpa_tflops": number(tr.get("torch_sdpa_tflops"))}
        row["kiln_over_torch_sdpa"] = ratio(row["kiln_tflops"], row["torch_sdpa_tflops"])
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------
# Goals


def goal(name, measured, comparison, target, **where):
    """{"goal", ..., "measured", "comparison", "target", "met"}; met is null when either is missing."""
    measured, target = number(measured), number(target)
    met = None
    if measured is not None and target is not None:
        met = measured >= target if comparison == ">=" else measured <= target
    return {"goal": name, **where, "measured": measured, "comparison": comparison, "target": target, "met": met}


def first_value(row, keys):
    """(key, value) of the first key of row with a number, else (None, None)."""
    for k in keys:
        if number(row.get(k)) is not None:
            return k, row[k]
    return None, None


def model_goals(m):
    on = {"model": m["name"], "precision": m["precision"]}
    cold_key, cold = first_value(m, KILN_COLD_KEYS)
    warm_key, warm = first_value(m, KILN_WARM_KEYS)
    return [
        goal("train step: kiln compiled ms / torch.compile ms", m["kiln_compiled_train_over_torch_compile_train"],
             "<=", 1.0, **on),
        goal("train step (stretch): kiln compiled ms / torch.compile ms",
             m["kiln_compiled_train_over_torch_compile_train"], "<=", 0.85, **on),
        goal("train step: kiln eager ms / torch eager ms", m["kiln_eager_train_over_torch_eager_train"], "<=", 1.3,
             **on),
        goal("inference: kiln compiled ms / torch.compile ms", m["kiln_compiled_over_torch_compile"], "<=", 1.0,
             **on),
        dict(goal("cold compile of the train step, s: kiln <= torch.compile", cold, "<=",
                  m.get("torch_compile_train_cold_s"), **on), measured_key=cold_key),
        dict(goal("warm compile, s", warm, "<=", 1.0, **on), measured_key=warm_key),
        goal("peak memory: kiln GB / torch GB (mirror attention)", m["kiln_peak_over_torch_mirror_peak"], "<=", 1.2,
             **on),
    ]


def kernel_goals(k):
    target = 0.9 if k["name"].startswith(("softmax_rows", "layernorm_rows")) else 0.8
    return [goal("kiln GB/s / copy GB/s", k["fraction_of_copy"], ">=", target, kernel=k["name"]),
            goal("kiln GB/s / torch.compile GB/s", k["kiln_over_torch_compile"], ">=", 0.9, kernel=k["name"])]


def check_goal(check):
    passed = check.get("pass") if isinstance(check, dict) else None
    passed = passed if isinstance(passed, bool) else None
    return {"goal": f"correctness check passes (relative {CHECK_BOUND:g})", "measured": passed, "comparison": "==",
            "target": True, "met": passed}


def goals(report):
    out = []
    for m in report["models"]:
        if m["name"] == GOAL_MODEL and m["precision"] == DEFAULT_PRECISION:
            out += model_goals(m)
    for k in report["kernels"]:
        out += kernel_goals(k)
    out.append(check_goal(report["check"]))
    return out


# ---------------------------------------------------------------------------------------------
# Merge


def merge(kiln, torch, sources):
    # copy_gbps is kiln's measurement; torch's stands in only when kiln's is missing.
    copy_gbps, copy_source = number(kiln.get("copy_gbps")), "kiln"
    if copy_gbps is None:
        copy_gbps = number(torch.get("copy_gbps"))
        copy_source = "torch" if copy_gbps is not None else None
    report = {
        "device": kiln.get("device", torch.get("device")),
        "torch_device": torch.get("device"),
        "date": datetime.date.today().isoformat(),
        "sources": sources,
        "torch": torch.get("torch", torch.get("torch_version")),
        "copy_gbps": copy_gbps,
        "copy_gbps_from": copy_source,
        "torch_copy_gbps": number(torch.get("copy_gbps")),
        "models": merge_models(kiln, torch),
        "kernels": merge_kernels(kiln, torch, copy_gbps),
        "attention": merge_attention(kiln, torch),
        "step_breakdown": dict_list(kiln.get("step_breakdown")),
        "check": torch.get("check") if isinstance(torch.get("check"), dict) else None,
    }
    report["goals"] = goals(report)
    # The other top-level keys: kiln's as they are (suite, size, losses, ...), torch's as torch_<key>.
    for k, v in kiln.items():
        report.setdefault(k, v)
    for k, v in torch.items():
        if k not in ("device", "copy_gbps", "torch", "torch_version", "models", "kernels", "attention", "check"):
            report.setdefault(torch_side(k), v)
    return report


# ---------------------------------------------------------------------------------------------
# Markdown


def cell(x, digits=2):
    if x is None:
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, (int, float)):
        return f"{x:.{digits}f}"
    if isinstance(x, list):
        return "[" + ", ".join(str(v) for v in x) + "]"
    return str(x).replace("|", "\\|").replace("\n", " ")


def sci(x):
    return cell(x) if number(x) is None else f"{x:.2e}"


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def columns_table(rows, columns, lead):
    """One row per entry: the lead cells, then each (title, key, digits) column."""
    return table([title for title, _ in lead] + [title for title, _, _ in columns],
                 [[cell(r.get(key)) for _, key in lead] + [cell(r.get(key), d) for _, key, d in columns]
                  for r in rows])


MODEL_LEAD = [("model", "name"), ("precision", "precision")]
ATTENTION_COLUMNS = [("kiln ms", "kiln_ms", 3), ("kiln TFLOP/s", "kiln_tflops", 1),
                     ("torch SDPA ms", "torch_sdpa_ms", 3), ("torch SDPA TFLOP/s", "torch_sdpa_tflops", 1),
                     ("kiln / torch", "kiln_over_torch_sdpa", 2)]
TIME_COLUMNS = [
    ("kiln eager ms", "kiln_eager_ms", 3), ("torch eager ms", "torch_eager_ms", 3),
    ("kiln / torch eager", "kiln_eager_over_torch_eager", 2),
    ("kiln compiled ms", "kiln_compiled_ms", 3), ("torch.compile ms", "torch_compile_ms", 3),
    ("kiln / torch.compile", "kiln_compiled_over_torch_compile", 2),
    ("kiln eager train ms", "kiln_eager_train_ms", 3), ("torch eager train ms", "torch_eager_train_ms", 3),
    ("kiln / torch eager train", "kiln_eager_train_over_torch_eager_train", 2),
    ("kiln compiled train ms", "kiln_compiled_train_ms", 3), ("torch.compile train ms", "torch_compile_train_ms", 3),
    ("kiln / torch.compile train", "kiln_compiled_train_over_torch_compile_train", 2)]
MIRROR_COLUMNS = [
    ("mirror eager ms", "torch_mirror_eager_ms", 3), ("mirror torch.compile ms", "torch_mirror_compile_ms", 3),
    ("kiln compiled / mirror torch.compile", "kiln_compiled_over_torch_mirror_compile", 2),
    ("mirror eager train ms", "torch_mirror_eager_train_ms", 3),
    ("mirror torch.compile train ms", "torch_mirror_compile_train_ms", 3),
    ("kiln compiled train / mirror torch.compile train", "kiln_compiled_train_over_torch_mirror_compile_train", 2)]
# kiln_compile_cold_s and kiln_compile_warm_s are the training step's (bench/bench_gpu_real.cpp);
# torch_compile_cold_s is the inference compile's.
COMPILE_MEMORY_COLUMNS = [
    ("kiln train cold s", "kiln_compile_cold_s", 2), ("torch.compile train cold s", "torch_compile_train_cold_s", 1),
    ("kiln train warm s", "kiln_compile_warm_s", 3), ("kiln inference cold s", "kiln_compile_infer_cold_s", 2),
    ("torch.compile inference cold s", "torch_compile_cold_s", 1),
    ("kiln inference warm s", "kiln_compile_infer_warm_s", 3),
    ("kiln peak GB", "kiln_peak_gb", 2), ("kiln eager peak GB", "kiln_eager_peak_gb", 2),
    ("torch peak GB", "torch_peak_gb", 2), ("torch eager peak GB", "torch_eager_peak_gb", 2),
    ("mirror peak GB", "torch_mirror_peak_gb", 2),
    ("kiln / mirror peak", "kiln_peak_over_torch_mirror_peak", 2)]
KERNEL_COLUMNS = [
    ("kiln GB/s", "kiln_gbps", 1), ("kiln eager GB/s", "kiln_eager_gbps", 1),
    ("torch.compile GB/s", "torch_compile_gbps", 1), ("torch eager GB/s", "torch_eager_gbps", 1),
    ("kiln / copy", "fraction_of_copy", 3), ("kiln / torch.compile", "kiln_over_torch_compile", 2)]


def mirror_table(report):
    rows = [m for m in report["models"] if any(m.get(key) is not None for _, key, _ in MIRROR_COLUMNS)]
    return columns_table(rows, MIRROR_COLUMNS, MODEL_LEAD) if rows else "No mirror-attention rows."


def step_breakdown_table(report):
    rows = report["step_breakdown"]
    if not rows:
        return "No step breakdown in kiln's JSON."
    # A model's step is its "total" row where kiln gives one, else the sum of its categories.
    sums, totals = {}, {}
    for r in rows:
        if r.get("category") == "total":
            totals.setdefault(r.get("model"), number(r.get("ms")))
        else:
            sums[r.get("model")] = sums.get(r.get("model"), 0.0) + (number(r.get("ms")) or 0.0)
    totals = {m: totals[m] if totals.get(m) is not None else sums.get(m) for m in set(sums) | set(totals)}
    return table(["model", "category", "ms", "share of the step"],
                 [[cell(r.get("model")), cell(r.get("category")), cell(number(r.get("ms")), 3),
                   cell(ratio(r.get("ms"), totals[r.get("model")]), 3)] for r in rows])


def loss_cell(x):
    return cell(x, 6)


CHECK_ROWS = [("loss, kiln", "loss_kiln", loss_cell), ("loss, torch", "loss_torch", loss_cell),
              ("loss relative difference", "loss_rel_diff", sci),
              ("max over tensors of ‖g_kiln − g_torch‖ / ‖g_torch‖", "grad_max_rel_diff", sci),
              ("worst tensor", "grad_worst", cell),
              ("max relative difference of the AdamW losses", "losses_max_rel_diff", sci),
              ("pass", "pass", cell)]


def check_table(report):
    c = report["check"]
    if not c:
        return "No check in the torch JSON (bench_real.py --check-dir)."
    rows = [[title, f(c.get(key))] for title, key, f in CHECK_ROWS]
    errors = c.get("errors")
    if isinstance(errors, dict):
        rows += [[f"error ({label})", cell(str(text).splitlines()[0] if text else "")] for label, text in errors.items()]
    return table(["check (f32, TF32 off)", "value"], rows)


def goal_table(report):
    rows = []
    for g in report["goals"]:
        subject = g.get("kernel") or g.get("model") or "all"
        measured = cell(g["measured"], 3)
        if g.get("measured_key"):
            measured += f" ({g['measured_key']})"
        met = "met" if g["met"] is True else "not met" if g["met"] is False else "—"
        rows.append([g["goal"], subject, f"{g['comparison']} {cell(g['target'], 2)}", measured, met])
    return table(["goal", "on", "target", "measured", "met"], rows)


def markdown(report):
    head = (f"{cell(report['device'])}; copy {cell(report['copy_gbps'], 1)} GB/s (from "
            f"{report['copy_gbps_from'] or 'neither'}; torch's copy {cell(report['torch_copy_gbps'], 1)} GB/s); "
            f"torch {cell(report['torch'])}; {report['date']}")
    met = [g["met"] for g in report["goals"]]
    summary = (f"{met.count(True)} goals met, {met.count(False)} not met, {met.count(None)} without a value.")
    return "\n\n".join([
        head,
        "### Models: time (torch with F.scaled_dot_product_attention)",
        columns_table(report["models"], TIME_COLUMNS, MODEL_LEAD),
        "### Models: torch with the mirror of kiln's attention",
        mirror_table(report),
        "### Models: compile time and peak memory",
        columns_table(report["models"], COMPILE_MEMORY_COLUMNS, MODEL_LEAD),
        "### Kernels",
        columns_table(report["kernels"], KERNEL_COLUMNS, [("kernel", "name"), ("shape", "shape")]),
        "### Attention alone (TFLOP/s; torch: F.scaled_dot_product_attention)",
        columns_table(report["attention"], ATTENTION_COLUMNS,
                      [("shape", "shape"), ("dtype", "dtype"), ("causal", "causal"), ("pass", "pass")]),
        "### kiln's training step by category",
        step_breakdown_table(report),
        "### Check against PyTorch",
        check_table(report),
        "### Goals",
        summary,
        goal_table(report),
    ]) + "\n"


def write_atomic(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def main():
    p = argparse.ArgumentParser(description="merge kiln's and PyTorch's real-size H200 benchmark JSON")
    p.add_argument("--kiln", required=True, help="JSON written by `kiln bench gpu --size real`")
    p.add_argument("--torch", required=True, help="JSON written by bench/torch/bench_real.py")
    p.add_argument("--out", required=True, help="merged JSON, e.g. bench/results/h200-real-YYYY-MM-DD.json")
    p.add_argument("--table", help="also write the Markdown tables here")
    args = p.parse_args()
    # File names only: the folder is the machine's own business.
    report = merge(load(args.kiln), load(args.torch),
                   {"kiln": os.path.basename(args.kiln), "torch": os.path.basename(args.torch)})
    write_atomic(args.out, json.dumps(report, indent=2) + "\n")
    text = markdown(report)
    print(text, end="")
    if args.table:
        write_atomic(args.table, text)
    print(f"\nwrote {args.out}" + (f" and {args.table}" if args.table else ""))


if __name__ == "__main__":
    main()
