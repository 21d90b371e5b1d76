"""Do a vector pair's slow rounds follow where its per-call buffers land? (the README's bullet on
slow rounds: the 3D grid's sptrsv_spmv / spmv_sptrsv had rounds 1.2–1.8× slower than the rest in
two CLI runs of 2026-12-04, every schedule alike). A call allocates VEC and the dataflow slots
afresh (tiers.buffers.empty); within one do_bench the caching allocator hands back the same
blocks, and between the CLI's rounds other providers' allocations may move them. This probe
times many rounds of one prepared t3 call and logs, per round, the addresses of the buffers the
call allocated:

  shuffle: before each round a spacer tensor of a random size (0–64 MiB, seeded) is allocated and
           kept, so the call's buffers land somewhere else each round;
  arena:   every buffer the call asks for is carved out of one preallocated arena at an offset
           that steps by --step bytes each round (the same offsets for every buffer of a call),
           so the rounds sweep the buffers' placement, everything else fixed.

    PYTHONPATH=. python3 dev/sparse_fusion/slow_rounds.py OUT.csv [--case poisson3d:100:sptrsv_spmv]
        [--dtype float32] [--rounds 24] [--step 4096]

GPU (a CPU run with TRITON_INTERPRET=1 and a small case checks the plumbing, timing with
perf_counter). Every round's output is compared with the first round's before it is timed.
Writes one CSV row per round: mode, round, spacer or offset bytes, each buffer's address (hex)
and its address mod 2 MiB, the round's median ms and, since its first GPU run, the call's host
time (tiers.bench.sparse_fusion._enqueue_ms: whether the GPU could be waiting for the host).

Run on 2026-12-04 (H200, figures/data/slow_rounds_h200_2026-12-04*): no slow round followed the
buffers' placement (one in 80, at addresses that fast rounds also had)."""

import argparse
import contextlib
import csv
import time

import numpy as np
import torch

from tiers import buffers
from tiers import fusion_schedules as fs
from tiers.bench import sparse_fusion as bench
from tiers.bench.common import time_ms
from tiers.t3_triton_fused import sparse_fusion as t3


@contextlib.contextmanager
def logged_buffers(log, arena=None, offset=0):
    """buffers.empty records each tensor it hands out (and with `arena`, carves it from there, at
    `offset` onwards; the function yielded starts a call's buffers at `offset` again)."""
    plain = buffers.empty
    used = [offset]

    def restart():
        used[0] = offset

    def empty(shape, *, dtype, device):
        if arena is None:
            out = plain(shape, dtype=dtype, device=device)
        else:
            size = int(np.prod(shape)) * torch.empty((), dtype=dtype).element_size()
            at = -(-used[0] // 256) * 256                   # torch's own alignment
            out = arena[at:at + size].view(dtype).view(shape)
            used[0] = at + size
        log.append(out.data_ptr())
        return out

    buffers.empty = empty
    try:
        yield restart
    finally:
        buffers.empty = plain


def _time(call, cuda):
    if cuda:
        return time_ms(call)
    start = time.perf_counter()
    call()
    return 1e3 * (time.perf_counter() - start)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--case", default="poisson3d:100:sptrsv_spmv")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--rounds", type=int, default=24)
    ap.add_argument("--step", type=int, default=4096)
    args = ap.parse_args()
    name, size, pair = args.case.split(":")
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    dtype = getattr(torch, args.dtype)
    A = bench.make_matrix(name, int(size))
    ops = bench.operands(pair, A)
    schedule = fs.inspect(pair, *ops, kind="sparse_fusion")
    v = torch.randn(A.shape[0], dtype=dtype, device=device)
    run = t3.prepare(pair, *ops, like=v, schedule=schedule, executor="dataflow")
    want = [o.clone() for o in run(v)]
    rng = np.random.default_rng(0)
    arena = torch.empty(1 << 30 if cuda else 1 << 26, dtype=torch.uint8, device=device)
    rows = []
    for mode in ("shuffle", "arena"):
        spacers = []
        for r in range(args.rounds):
            log = []
            if mode == "shuffle":
                moved = int(rng.integers(0, 64 << 20)) // 256 * 256
                spacers.append(torch.empty(max(moved, 1), dtype=torch.uint8, device=device))
                ctx = logged_buffers(log)
            else:
                moved = r * args.step
                ctx = logged_buffers(log, arena, moved)
            with ctx as restart:
                got = run(v)
                for a, b in zip(got, want):
                    if not torch.equal(a, b):
                        raise AssertionError(f"{mode} round {r}: the output differs from the first round's")
                calls = len(log)

                def call():
                    restart()
                    return run(v)
                ms = _time(call, cuda)
                host = bench._enqueue_ms(call) if cuda else None
            addresses = log[:calls]
            rows.append([mode, r, moved, " ".join(hex(a) for a in addresses),
                         " ".join(str(a % (2 << 20)) for a in addresses), f"{ms:.4f}",
                         "" if host is None else f"{host:.4f}"])
            print(*rows[-1], flush=True)
    with open(args.out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["mode", "round", "moved_bytes", "buffers", "buffers_mod_2MiB", "ms", "host_ms"])
        w.writerows(rows)


if __name__ == "__main__":
    main()
