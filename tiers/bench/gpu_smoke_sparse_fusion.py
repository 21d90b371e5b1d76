"""GPU smoke check, run before the sparse-fusion benchmark in the same device call:

    python -m tiers.bench.gpu_smoke_sparse_fusion [EXECUTOR ...]

t3 sparse-attention gradients with the current backward tiles against float64 t1, then every
sparse-fusion pair on small matrices in t2 and t3 (levels, sync-free with flags, and dataflow,
chains and segments where the pair allows; the flag and dataflow executors also with their
persistent programs taking tickets and striding, CLAIMED) against t0. Exits 2 when the flag
executor fails, else 3 when the dataflow executor fails, else 4 when the chain executor fails,
else 5 when the segment executor fails, so a session script can leave the failing one out of
the benchmark (`--executors ...`); with EXECUTOR arguments only those t3 executors run. Run it
under `timeout`, since a wrong wait hangs instead of failing. On a CPU it is a dry run in the
interpreter with smaller shapes."""
import sys
import time

import numpy as np
import torch

from tiers import registry
from tiers.acsr import ACSR
from tiers.tolerances import compare

dev = "cuda" if torch.cuda.is_available() else "cpu"   # cpu: a dry run of this script in the interpreter
LA, NG, NP = (1000, 60, 3000) if dev == "cuda" else (200, 6, 60)
bad_attention = []
for name, pat, D in (("blocked", ACSR.blocked(LA, 256), 64), ("dilated", ACSR.dilated_window(LA, 64, 4), 128)):
    q, k, v = (torch.randn(2, 3, LA, D, device=dev, dtype=torch.float16, requires_grad=True) for _ in range(3))
    do = torch.randn(2, 3, LA, D, device=dev, dtype=torch.float16)
    t3 = registry.get("sparse_attention", "t3_triton_fused")
    t1 = registry.get("sparse_attention", "t1_torch")
    g3 = torch.autograd.grad(t3(q, k, v, pat), (q, k, v), do)
    q1, k1, v1 = (x.detach().double().requires_grad_() for x in (q, k, v))
    o1 = t1(q1, k1, v1, pat)
    g1 = torch.autograd.grad(o1, (q1, k1, v1), do.double())
    for gname, a, b in zip("qkv", g3, g1):
        r = compare(a, b, "float16")
        print(f"sparse_attention t3 d{gname} {name} D={D}: rel {r['rel']:.1e} {'ok' if r['ok'] else 'FAILED'}", flush=True)
        if not r["ok"]:
            bad_attention.append(name)

from tiers import sparse_matrices as sm
from tiers.bench.sparse_fusion import PAIRS, as_values, operands
from tiers.fusion_schedules import inspect
from tiers.t3_triton_fused import sparse_fusion as t3f

# the executors whose programs may stride (t3f.STRIDING) run each way their blocks are claimed
PERSISTENT = {"programs_per_sm": t3f.PROGRAMS_PER_SM}
CLAIMED = {"syncfree": ({}, {**PERSISTENT, "claim": "counter"}, {**PERSISTENT, "claim": "stride"}),
           "dataflow": ({}, {"claim": "counter"})}
rng = np.random.default_rng(0)
fails = {"levels": 0, "syncfree": 0, "dataflow": 0, "chains": 0, "segments": 0, "t2": 0}
for mname, A in (("poisson2d", sm.poisson2d(NG)), ("powerlaw", sm.powerlaw_laplacian(NP, m=3, seed=1))):
    for pair in PAIRS:
        mats = operands(pair, A)
        b = rng.standard_normal(A.shape[0])
        ref = [as_values(o) for o in registry.get("sparse_fusion", "t0_numpy", pair)(*mats, b)]
        for dtype in ("float64", "float32"):
            vec = torch.tensor(b, device=dev, dtype=getattr(torch, dtype))
            out = registry.get("sparse_fusion", "t2_triton_unfused", pair)(*mats, vec)
            ok = all(compare(as_values(o), r, dtype)["ok"] for o, r in zip(out, ref))
            fails["t2"] += not ok
            print(f"{mname} {pair} {dtype} t2: {'ok' if ok else 'FAILED'}", flush=True)
            for kind in ("wavefront", "sparse_fusion"):
                s = inspect(pair, *mats, kind=kind)
                for ex in (x for x in t3f.executors_for(pair) if len(sys.argv) < 2 or x in sys.argv[1:]):
                    for claim in CLAIMED.get(t3f.kernel_of(ex, pair), ({},)):
                        t = time.perf_counter()
                        run = t3f.prepare(pair, *mats, like=vec, schedule=s, executor=ex, **claim)
                        out = run(vec)
                        if dev == "cuda":
                            torch.cuda.synchronize()
                        res = [compare(as_values(o), r, dtype) for o, r in zip(out, ref)]
                        ok = all(r["ok"] for r in res)
                        fails[ex] += not ok
                        print(f"{mname} {pair} {dtype} t3 {kind} {ex} P={run.programs_per_sm}/SM {run.claim}: "
                              f"rel {max(r['rel'] for r in res):.1e} {'ok' if ok else 'FAILED'} "
                              f"({time.perf_counter() - t:.2f} s)", flush=True)
print("failures:", fails, "attention:", bad_attention)
sys.exit(2 if fails["syncfree"] else 3 if fails["dataflow"] else 4 if fails["chains"] else
         5 if fails["segments"] else 0)
