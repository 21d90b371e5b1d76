"""A/B in one process: t3's prepared calls at an earlier commit against the working tree.

A developer's probe, not package code (needs a CUDA GPU and git). The commit's `tiers` package is
exported with `git archive` into a temporary folder and imported as `tiers_old` (its absolute
imports rewritten), so both versions run in one process on one GPU — process-to-process
differences reached 10 % on the factor pairs, more than the changes measured. Per case three
runners: "old" and "old2" from the commit, "new" from the working tree, each called 4 times with
two vectors and its 2nd and 4th results checked against float64 (the 2nd after the 4th: a later
call must not overwrite an earlier result); then 5 rounds of do_bench medians, the order rotated
each round. Writes OUT.json (one row per case) and prints each row.

    python dev/sparse_fusion/ab_commit.py COMMIT|FILE.tar[,FILE2.tar...] OUT.json poisson3d:100:spilu0_sptrsv:sparse_fusion[:float32],... [OPTIONS]

More packages after the first, comma-separated, run as "alt1", "alt2", … beside the three: a
variant between the commit and the working tree. OPTIONS (parse_options' form,
"label=key:value+...;..."): `prepare` keywords per runner, every runner on the dataflow executor
either way; a label that is none of the packages' is one more runner of the working tree, e.g.
"new=lean:true+block_rows:16;old=lean:true+block_rows:16;old2=lean:true+block_rows:16;flags=lean:false"
(the 2D grid's lean rows at 16 lanes in both packages, beside the working tree's values as
flags: the runs of figures/data/ic_rsqrt_ab_*, ic_rsqrt_ab2_*, made by a copy of this loop,
ab_commit_lean.py, folded in here since).

Data of 2026-12-01 (H200): figures/data/ab_pivots_* and ab_pivots_in_kernel_* (COMMIT 6986f32); of
2026-12-02: ab_steps_*, ab_across_* (a tar of ca82b48).
"""
import importlib
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import triton
from triton.testing import do_bench

from tiers import fusion_schedules as fs
from tiers.bench import sparse_fusion as bench
from tiers.t3_triton_fused import sparse_fusion as sf

LABELS = ("old", "new", "old2")


def import_old(commit, name="tiers_old"):
    """(fusion_schedules, t3 sparse_fusion) of `commit`'s package, imported as `name`. `commit`
    may also name a tar file of it (`git archive COMMIT tiers > FILE.tar`, made here: the lent
    GPU's copy of the repository may not hold the commit)."""
    root = Path(tempfile.mkdtemp())
    if commit.endswith(".tar"):
        tar = Path(commit).read_bytes()
    else:
        tar = subprocess.run(["git", "archive", commit, "tiers"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=tar, check=True)
    (root / "tiers").rename(root / name)
    for f in (root / name).rglob("*.py"):
        s = f.read_text()
        s = re.sub(r"\bfrom tiers\b", "from " + name, s)
        s = re.sub(r"\bimport tiers\b", "import " + name, s)
        f.write_text(re.sub(r"\btiers\.(?=[a-z_0-9]+)", name + ".", s))
    sys.path.insert(0, str(root))
    return (importlib.import_module(name + ".fusion_schedules"),
            importlib.import_module(name + ".t3_triton_fused.sparse_fusion"))


def parse_options(text):
    """{label: (prepare keywords, {attribute: override})} from "a=;b=early:0+programs_per_sm:6":
    integers and true / false where they parse; `early` and `direct` are attributes set on the
    prepared runner (ab_options.py), not keywords, and so is `binds` (`binds:0`: its dataflow
    call launches through the JIT at every call, t3's BOUND off), and `late_look` (`late_look:1`:
    a staged factor row reads its late operands at its pivots' polls, t3's looks_late), and `relook`
    (`relook:0`: a staged row does not read its missing x_j again after its late operands, t3's
    relooks; `relook:1`: every staged row that carries its solve does, in float32 too); `sums:N`
    sets the runner's `sums` (_dataflow's SUMS: which blocks take their sums at every poll,
    sums_each_poll)."""
    variants = {}
    for item in filter(None, text.split(";")):
        label, _, spec = item.partition("=")
        kw, sets = {}, {}
        for pair in filter(None, spec.split("+")):
            key, _, value = pair.partition(":")
            if key in ("early", "direct", "binds", "late_look", "relook"):
                sets[key] = value == "1"
            elif key == "sums":
                sets[key] = int(value)
            else:
                kw[key] = option_value(value)
        variants[label] = (kw, sets)
    return variants


def option_value(text):
    """A `prepare` keyword's value as written in an option: an integer or true / false where it
    parses, else the text (parse_options'; stamps.py's key=value items)."""
    return int(text) if text.lstrip("-").isdigit() else {"true": True, "false": False}.get(text, text)


def operands_and_vectors(case, dev):
    """(pair, kind, dtype, operands, v64, v, v2) of a case name, matrix:size:pair:schedule[:dtype]: the
    bench's matrix and operands, a float64 vector on the CPU, it and a second vector on `dev`."""
    p = case.split(":")
    name, size, pair, kind = p[0], int(p[1]), p[2], p[3]
    dtype = p[4] if len(p) > 4 else "float64"
    A = bench.make_matrix(name, size)
    mats = bench.operands(pair, A)
    g = torch.Generator().manual_seed(3)
    v64 = torch.rand(A.shape[0], generator=g, dtype=torch.float64) + 0.5
    v = v64.to(dev, getattr(torch, dtype))
    v2 = (torch.rand(A.shape[0], generator=g, dtype=torch.float64) + 0.5).to(dev, getattr(torch, dtype))
    return pair, kind, dtype, mats, v64, v, v2


def check_and_time(case, runs, labels, refs, v, v2, dtype, rounds=5):
    """Each runner called 4 times, its 2nd and 4th results checked against `refs`; then `rounds`
    rounds of do_bench medians of the runners that were right, the order rotated each round.
    Each round also takes a runner's host time (the bench's _enqueue_ms, 20 calls back to back).
    Returns the case's row (ok, err, rounds, ms, host_rounds, host_ms)."""
    row = {"case": case, "ok": {}, "err": {}, "rounds": {}}
    for label in labels:
        r = runs[label]
        outs = [r(v) for _ in range(2)] + [r(v2), r(v)]
        ok, err, msg = bench.check(outs[-1], refs, dtype)
        ok0, err0, msg0 = bench.check(outs[1], refs, dtype)
        row["ok"][label], row["err"][label] = bool(ok and ok0), float(max(err, err0))
        row["graph_" + label] = getattr(r, "graph", None) is not None
        if not (ok and ok0):
            print("WRONG", case, label, msg, msg0, flush=True)
    if v.is_cuda:
        for rd in range(rounds):
            k = rd % len(labels)
            for label in labels[k:] + labels[:k]:
                if row["ok"][label]:
                    ms = do_bench(lambda: runs[label](v), warmup=25, rep=250, return_mode="median")
                    row["rounds"].setdefault(label, []).append(round(ms, 4))
                    host = bench._enqueue_ms(lambda: runs[label](v))
                    row.setdefault("host_rounds", {}).setdefault(label, []).append(round(host, 4))
    row["ms"] = {label: float(np.median(x)) for label, x in row["rounds"].items()}
    row["host_ms"] = {label: float(np.median(x)) for label, x in row.get("host_rounds", {}).items()}
    return row


def rotated_rounds(calls, labels, rounds=5):
    """(samples, medians) in ms of calls[label]() for each label: `rounds` rounds of do_bench
    medians, the order rotated each round so that no call always runs first (the probes' loop)."""
    samples = {}
    for rd in range(rounds):
        k = rd % len(labels)
        for label in labels[k:] + labels[:k]:
            ms = do_bench(calls[label], warmup=25, rep=250, return_mode="median")
            samples.setdefault(label, []).append(round(ms, 4))
    return samples, {label: float(np.median(x)) for label, x in samples.items()}


def run_header(dev, **extra):
    """The head of a probe's OUT.json: device, versions, date (UTC), `extra`, and no rows yet."""
    return {"device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu", "torch": torch.__version__,
            "triton": triton.__version__, "numpy": np.__version__,
            "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), **extra, "rows": []}


def save_row(res, row, out):
    """Prints a case's row, adds it to `res` and writes `res` to `out` (after every case, so that a
    run cut short keeps what it measured); frees the cached GPU memory of the case's runners."""
    print(json.dumps(row), flush=True)
    res["rows"].append(row)
    json.dump(res, open(out, "w"), indent=1)
    torch.cuda.empty_cache()


def main():
    commits, out, cases = sys.argv[1].split(","), sys.argv[2], sys.argv[3].split(",")
    options = {label: kw for label, (kw, _) in parse_options(sys.argv[4] if len(sys.argv) > 4 else "").items()}
    packages = {"old": import_old(commits[0])}
    packages["old2"] = packages["old"]
    packages.update({f"alt{k}": import_old(c, f"tiers_alt{k}") for k, c in enumerate(commits[1:], 1)})
    packages["new"] = (fs, sf)
    labels = list(LABELS) + [k for k in packages if k.startswith("alt")] + [k for k in options if k not in packages]
    dev = torch.device("cuda")
    res = run_header(dev, old=commits[0], alts=commits[1:], options=options)
    for case in cases:
        pair, kind, dtype, mats, v64, v, v2 = operands_and_vectors(case, dev)
        schedules, runs = {}, {}
        for label in labels:
            fs_of, sf_of = packages.get(label, packages["new"])
            if fs_of not in schedules:
                schedules[fs_of] = fs_of.inspect(pair, *mats, kind=kind)
            runs[label] = sf_of.prepare(pair, *mats, like=v, schedule=schedules[fs_of], executor="dataflow",
                                        **options.get(label, {}))
        row = check_and_time(case, runs, labels, bench.reference(pair, mats, v64.numpy()), v, v2, dtype)
        row["lean"] = {k: bool(getattr(r, "lean", False)) for k, r in runs.items()}
        del runs
        save_row(res, row, out)


if __name__ == "__main__":
    main()
