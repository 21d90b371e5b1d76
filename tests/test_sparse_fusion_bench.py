"""The sparse-fusion benchmark, its figure and its pictures, on a CPU: the quick benchmark end to
end (Triton in its interpreter), the rule that a wrong result is never timed, the reference's
own check, the payoff and speedup arithmetic, the figure from a rows file written here, and
the DAG and schedule pictures."""
import json
import math
import zlib

import matplotlib
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from tiers import cli, figures  # noqa: E402
from tiers.bench import sparse_fusion as bench  # noqa: E402
from tiers.bench.common import load_rows, write_rows  # noqa: E402
from tiers.sparse_matrices import poisson2d, powerlaw_laplacian, tril_csr  # noqa: E402
from tiers.t3_triton_fused import sparse_fusion as t3_fused  # noqa: E402


def _seed(*parts):
    return zlib.crc32(repr(parts).encode())


# ------------------------------------------------------------------ the quick benchmark, end to end

def test_quick_bench_cli_end_to_end(tmp_path, capsys):
    """`python -m tiers bench sparse_fusion --quick` on two tiny matrices and every pair: every
    tier row under every schedule is checked and timed, the anchors say why they are absent,
    and the rows on disk are the rows returned."""
    cli.main(["bench", "sparse_fusion", "--quick", "--matrices", "poisson2d,powerlaw", "--sizes",
              "poisson2d=4,powerlaw=20", "--providers", "t2_triton_unfused,t3_triton_fused,cusparse,scipy",
              "--out", str(tmp_path)])
    out = capsys.readouterr().out
    files = sorted(tmp_path.glob("sparse_fusion_*.json"))
    assert len(files) == 1 and "wrote" in out
    rows = json.loads(files[0].read_text())["rows"]
    assert {r["n"] for r in rows} == {16, 20}
    t2 = [r for r in rows if r["provider"] == "t2_triton_unfused"]
    t3 = [r for r in rows if r["provider"] == "t3_triton_fused"]
    assert len(t2) == 2 * len(bench.PAIRS)                        # t2 follows its own per-kernel wavefronts
    executors = sum(len(t3_fused.executors_for(pair)) for pair in bench.PAIRS)
    assert len(t3) == 2 * len(bench.KINDS) * executors             # every schedule, every executor a pair allows
    assert {r["executor"] for r in t3 if r["pair"] == "spilu0_sptrsv"} == {"levels", "syncfree", "dataflow"}
    for r in t2 + t3:
        assert r["status"] == "ok", r
        assert r["ms"] > 0 and r["rel_err"] <= 1e-10 and r["timed"] == "prepared"
        assert r["refresh_ms"] > 0 and "refresh_error" not in r, r     # refreshed, then checked and timed
    for r in t3:
        assert r["levels"] >= 1 and r["inspector_ms"] > 0 and "payoff_runs" in r
    for r in t2 + t3:                  # the factor pairs record their held rows' shape and the rows walked
        factor = r["pair"] in ("spilu0_sptrsv", "spic0_sptrsv")
        assert ("held_shape" in r and r["walked_rows"] == 0) == factor, r
    for r in rows:
        if r["provider"] == "scipy":
            assert (r["status"] == "ok") == (r["pair"] not in ("spilu0_sptrsv", "spic0_sptrsv")), r
        if r["provider"] == "cusparse":
            assert r["status"].startswith("n/a"), r
    for pair in bench.PAIRS:
        assert pair in out     # the summary table
    # wavefront: every partition one iteration; the fused schedule needs no more levels
    for matrix in ("poisson2d", "powerlaw"):
        for pair in bench.PAIRS:
            case = {r["schedule"]: r for r in t3 if r["matrix"] == matrix and r["pair"] == pair}
            assert case["wavefront"]["partitions"] == 2 * case["wavefront"]["n"]
            assert case["sparse_fusion"]["levels"] <= case["wavefront"]["levels"]


def test_quick_bench_reads_a_matrix_market_file(tmp_path, capsys):
    """--matrices takes a Matrix Market file (here gzipped, stored symmetric) at its own size: its
    rows carry the file's name and size and are checked and timed like a generator's."""
    import gzip

    import scipy.io

    from tiers.sparse_matrices import banded_spd

    A = banded_spd(24, 3, seed=_seed("mtx"))
    plain = tmp_path / "band.mtx"
    scipy.io.mmwrite(plain, A, symmetry="symmetric")
    path = tmp_path / "band.mtx.gz"
    path.write_bytes(gzip.compress(plain.read_bytes()))
    cli.main(["bench", "sparse_fusion", "--quick", "--matrices", str(path), "--pairs", "sptrsv_spmv,spic0_sptrsv",
              "--providers", "t3_triton_fused,scipy", "--schedules", "sparse_fusion", "--executors", "dataflow",
              "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert f"Matrix Market file {path}" in out
    rows = json.loads(next((tmp_path / "out").glob("sparse_fusion_*.json")).read_text())["rows"]
    t3 = [r for r in rows if r["provider"] == "t3_triton_fused"]
    assert {(r["pair"], r["matrix"], r["n"], r["size"], r["nnz"]) for r in t3} == {
        (p, "band", 24, 24, A.nnz) for p in ("sptrsv_spmv", "spic0_sptrsv")}
    for r in t3:
        assert r["status"] == "ok" and r["rel_err"] <= 1e-10, r


@pytest.mark.parametrize("setup,match", [
    (lambda d: (["--matrices", str(d / "missing.mtx")]), "Matrix Market file .*missing.mtx.* not found"),
    (lambda d: (["--matrices", "poisson9d"]), "unknown matrix 'poisson9d'.*or a Matrix Market file"),
    (lambda d: (["--matrices", str(d / "rect.mtx")]), r"rect.mtx must be square, got shape \(4, 5\)"),
    (lambda d: (["--matrices", str(d / "c.mtx")]), "c.mtx has complex values"),
    (lambda d: (["--matrices", str(d / "text.mtx")]), "text.mtx is not a Matrix Market file that SciPy can read"),
    (lambda d: (["--matrices", str(d / "rect.mtx"), "--sizes", "rect=10"]), "'rect', which is not a generator"),
    (lambda d: (["--matrices", f"{d / 'rect.mtx'},{d / 'sub' / 'rect.mtx.gz'}"]), "both be labelled 'rect'"),
    (lambda d: (["--matrices", f"powerlaw,{d / 'powerlaw.mtx'}"]), "both be labelled 'powerlaw'"),
])
def test_bench_matrix_arguments_are_checked(tmp_path, setup, match):
    """A missing, rectangular, complex or unreadable file, an unknown name and a size for a file each
    stop the benchmark with a message that names what is wrong, before anything is measured."""
    import scipy.io
    import scipy.sparse as sp

    scipy.io.mmwrite(tmp_path / "rect.mtx", sp.random(4, 5, density=0.5, format="csr", random_state=1))
    (tmp_path / "c.mtx").write_text("%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1 2\n")
    (tmp_path / "text.mtx").write_text("not a matrix\n")
    (tmp_path / "sub").mkdir()
    for name in ("sub/rect.mtx.gz", "powerlaw.mtx"):
        (tmp_path / name).write_bytes(b"")      # present; the labels are checked before any file is read
    with pytest.raises(SystemExit, match=match):
        cli.main(["bench", "sparse_fusion", "--quick", "--pairs", "sptrsv_spmv", "--providers", "scipy",
                  "--out", str(tmp_path / "out"), *setup(tmp_path)])


def test_rounds_keep_the_median_of_interleaved_samples(monkeypatch):
    """--reps: every row a case timed on the device is timed again in rounds that go through all
    of them in turn; the row keeps the median and every sample, in the file as on the screen."""
    samples = {"a": iter([3.0, 1.0]), "b": iter([9.0, 5.0])}
    order = []

    def fake(call, quick):
        order.append(call.__name__)
        return next(samples[call.__name__]), "cuda_events"
    monkeypatch.setattr(bench, "_device_ms", fake)
    hosts = iter([0.5, 0.25, 0.75, 0.1, 0.3, 0.2])
    monkeypatch.setattr(bench, "_enqueue_ms", lambda call: next(hosts))
    monkeypatch.setattr(bench, "_cuda", lambda: True)
    monkeypatch.setattr(bench, "check", lambda outs, refs, dtype: (True, 0.0, ""))
    written = []
    case = bench._Case(dict(matrix="m", ordering="natural", dtype="float64", pair="p", bytes=1000), [], False,
                       False, written.append)

    def a():
        return ()

    def b():
        return ()
    case.measure(dict(provider="t3_triton_fused"), a)
    case.measure(dict(provider="cusparse"), b)
    assert [r["ms"] for r in written] == [3.0, 9.0] and order == ["a", "b"]
    samples = {"a": iter([1.0, 2.0]), "b": iter([5.0, 4.0])}
    case.rounds(3)
    assert order == ["a", "b", "a", "b", "a", "b"]                       # interleaved, not one row at a time
    assert [r["ms_reps"] for r in written] == [[3.0, 1.0, 2.0], [9.0, 5.0, 4.0]]
    assert [r["ms"] for r in written] == [2.0, 5.0] and written[0]["gbps"] == 1000 / 2.0 / 1e6
    # the call's host time beside each sample, taken right after it (_enqueue_ms), and its median
    assert [r["host_ms_reps"] for r in written] == [[0.5, 0.75, 0.3], [0.25, 0.1, 0.2]]
    assert [r["host_ms"] for r in written] == [0.5, 0.2]


def test_anchors_are_warmed_once_before_their_setup_is_timed(monkeypatch):
    """warm_anchor runs the anchor's call on a tiny matrix of the same pair and dtype once per
    process (CuPy's first use stays out of setup_ms); a failure there is left to the measured call."""
    import torch

    calls = []

    def fake(provider, pair, mats, v):
        calls.append((provider, pair, tuple(M.shape for M in mats), v.dtype))
        if pair == "spic0_sptrsv":
            raise NotImplementedError("no csric02 here")
        return lambda: None
    monkeypatch.setattr(bench, "cupy_call", fake)
    monkeypatch.setattr(bench, "_WARM", set())
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    for _ in range(2):
        for pair in ("sptrsv_spmv", "spic0_sptrsv"):
            bench.warm_anchor("cusparse", pair, "float32", device="cpu")
    bench.warm_anchor("cusparse", "sptrsv_spmv", "float64", device="cpu")
    assert calls == [("cusparse", "sptrsv_spmv", ((16, 16), (16, 16)), torch.float32),
                     ("cusparse", "spic0_sptrsv", ((16, 16),), torch.float32),
                     ("cusparse", "sptrsv_spmv", ((16, 16), (16, 16)), torch.float64)]


def test_enqueue_ms_times_the_host_side_of_a_call(monkeypatch):
    """_enqueue_ms: without CUDA there is no device to run ahead of, so None; with it (faked here:
    synchronize counted) the GPU is waited for only before and after the calls, which are issued
    back to back, and the time is per call."""
    import torch

    assert bench._enqueue_ms(lambda: None) is None or torch.cuda.is_available()
    syncs, calls = [], []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: syncs.append(len(calls)))
    ms = bench._enqueue_ms(lambda: calls.append(1), calls=7)
    assert len(calls) == 7 and syncs == [0, 7] and 0 <= ms < 1e3


def test_checked_calls_are_poisoned_and_timed_calls_are_not(monkeypatch):
    """The checked call poisons its fresh outputs whatever TIERS_POISON says, and the timed calls
    (host timer here; time_ms on the device) do not: the NaN fill is part of the check, not of the
    kernel's cost. The override ends with the block."""
    import triton.testing

    from tiers.bench import common
    from tiers.buffers import poisoned, poisoning
    seen = []

    def call():
        seen.append(poisoning())
        return ()
    monkeypatch.setattr(bench, "_cuda", lambda: False)
    monkeypatch.setattr(bench, "check", lambda outs, refs, dtype: (True, 0.0, ""))
    for env in ("0", "1"):
        monkeypatch.setenv("TIERS_POISON", env)
        seen.clear()
        case = bench._Case(dict(matrix="m", ordering="natural", dtype="float64", pair="p", bytes=1000), [], False,
                           False, lambda row: None)
        case.measure(dict(provider="t3_triton_fused"), call)
        assert seen[0] is True and len(seen) > 1 and not any(seen[1:])
        assert poisoning() is (env == "1")
    monkeypatch.setattr(triton.testing, "do_bench", lambda fn, **kw: (fn(), 1.0)[1])
    seen.clear()
    with poisoned(True):
        assert common.time_ms(call) == 1.0 and seen == [False] and poisoning()


def test_switch_sweeps_of_the_cli():
    """--fuse-rows takes a comma list of on/off (a sweep) and names what it does not understand."""
    assert cli._switches("on,off") == (True, False) and cli._switches("off") == (False,)
    with pytest.raises(SystemExit, match="expected on or off, got yes"):
        cli._switches("on,yes")


def test_a_wrong_result_is_recorded_and_never_timed(tmp_path, monkeypatch):
    """A provider whose output is off by one part in a thousand gets status "wrong" and no time."""
    from tiers import registry

    real_get = registry.get

    def broken(alg, tier, entry=None):
        fn = real_get(alg, tier, entry)
        if tier != "t3_triton_fused":
            return fn

        def off(*args, **kw):
            a, b = fn(*args, **kw)
            return a, b * 1.001
        return off

    timed = []
    monkeypatch.setattr(registry, "get", broken)
    # take the timing path a GPU takes, with a timer that only counts what it is given
    monkeypatch.setattr(bench, "_cuda", lambda: True)
    monkeypatch.setattr(bench, "_device_ms", lambda fn, quick: timed.append(1) or (1.0, "counted"))
    _, _, rows, _ = bench.run(matrices=("poisson2d",), pairs=("sptrsv_spmv",), quick=True, out_dir=tmp_path,
                              providers=("t1_torch", "t3_triton_fused"), sizes={"poisson2d": 4}, progress=False)
    t3 = [r for r in rows if r["provider"] == "t3_triton_fused"]
    t1 = [r for r in rows if r["provider"] == "t1_torch"]
    assert t3 and all(r["status"].startswith("wrong: output 1") and math.isnan(r["ms"]) for r in t3)
    assert t1 and all(r["status"] == "ok" for r in t1)
    assert len(timed) == len(t1)


# ------------------------------------------------------------------ the reference and the arithmetic

@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=st.sampled_from(["spilu0_sptrsv", "spic0_sptrsv"]), n=st.integers(8, 60), seed=st.integers(0, 2**16))
def test_factor_residual_accepts_the_factor_and_rejects_a_perturbed_one(pair, n, seed):
    """The check behind the ILU(0)/IC(0) reference: zero for t0's factor, clearly not zero once
    any one stored entry of it is changed."""
    from tiers.t0_numpy.sparse_fusion import spic0_sptrsv, spilu0_sptrsv

    A = powerlaw_laplacian(n, m=2, seed=seed)
    b = np.random.default_rng(seed).standard_normal(n)
    factor, _ = (spilu0_sptrsv if pair == "spilu0_sptrsv" else spic0_sptrsv)(A, b)
    values = np.array(bench.as_values(factor), dtype=np.float64)
    assert bench.factor_residual(pair, A, values) < 1e-13
    k = np.random.default_rng(seed + 1).integers(len(values))
    values[k] *= 1.01
    assert bench.factor_residual(pair, A, values) > 1e-6


def test_device_arrays_of_the_anchors_are_copied_to_the_host_for_the_check():
    """CuPy arrays refuse NumPy's implicit conversion (the first GPU run lost every cuSPARSE row
    to it); `as_values` copies them with `.get()`. A stand-in with CuPy's module name checks it."""
    Fake = type("ndarray", (), {"__module__": "cupy._core.core", "get": lambda self: np.arange(3.0)})
    ok, worst, msg = bench.check([Fake()], [np.arange(3.0)], "float64")
    assert ok and worst == 0.0 and not msg


def test_traffic_bytes_counts_each_array_once():
    A = poisson2d(4)                   # n = 16, nnz = 64; tril: 40
    L = tril_csr(A)
    assert bench.traffic_bytes("sptrsv_spmv", (L, A), 8) == (40 * 12 + 17 * 4) + (64 * 12 + 17 * 4) + 3 * 16 * 8
    assert bench.traffic_bytes("spilu0_sptrsv", (A,), 4) == (64 * 8 + 17 * 4) + 64 * 4 + 2 * 16 * 4
    assert bench.traffic_bytes("spic0_sptrsv", (A,), 8) == (40 * 12 + 17 * 4) + 40 * 8 + 2 * 16 * 8


def _row(matrix, pair, provider, ms, schedule="", executor="", status="ok", inspector_ms=None, ordering="natural",
         dtype="float64", setup_ms=None):
    return dict(matrix=matrix, ordering=ordering, dtype=dtype, pair=pair, n=100, nnz=460, provider=provider,
                schedule=schedule, executor=executor, workers=None, depth=None, status=status, ms=ms,
                inspector_ms=inspector_ms, setup_ms=setup_ms)


def _synthetic_rows(rng):
    """One matrix × pairs with known times; returns (rows, expected speedups)."""
    rows, want = [], {}
    for matrix in ("poisson2d", "powerlaw"):
        for pair in bench.PAIRS[:3]:
            ms = {k: float(rng.uniform(0.1, 10)) for k in ("cusparse", "t2", "wf", "lbc", "sf_levels", "sf_syncfree")}
            setup = {k: float(rng.uniform(0, 4)) for k in ("cusparse", "t2", "wf", "sf")}
            rows += [_row(matrix, pair, "cusparse", ms["cusparse"], setup_ms=setup["cusparse"]),
                     _row(matrix, pair, "scipy", 99.0),
                     _row(matrix, pair, "t2_triton_unfused", ms["t2"], "wavefront", inspector_ms=1.0,
                          setup_ms=setup["t2"]),
                     _row(matrix, pair, "t2_triton_unfused", math.nan, "lbc", status="wrong: output 0"),
                     _row(matrix, pair, "t3_triton_fused", ms["wf"], "wavefront", "levels", inspector_ms=1.0,
                          setup_ms=setup["wf"]),
                     _row(matrix, pair, "t3_triton_fused", ms["lbc"], "lbc", "levels", inspector_ms=2.0),
                     _row(matrix, pair, "t3_triton_fused", ms["sf_levels"], "sparse_fusion", "levels", inspector_ms=3.0,
                          setup_ms=setup["sf"]),
                     _row(matrix, pair, "t3_triton_fused", ms["sf_syncfree"], "sparse_fusion", "syncfree",
                          inspector_ms=3.0, setup_ms=setup["sf"])]
            fused = min(ms["sf_levels"], ms["sf_syncfree"])
            want[(matrix, pair)] = {"over_unfused": min(ms["cusparse"], ms["t2"]) / fused,
                                    "over_wavefront": ms["wf"] / fused, "over_lbc": ms["lbc"] / fused,
                                    "over_cusparse": ms["cusparse"] / fused, "over_t2": ms["t2"] / fused}
    return rows, want


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_speedups_and_payoff(seed):
    rows, want = _synthetic_rows(np.random.default_rng(seed))
    got = bench.speedups(rows)
    for (matrix, pair), w in want.items():
        for k, v in w.items():
            assert got[(matrix, "natural", "float64", pair)][k] == pytest.approx(v), (matrix, pair, k)
    for matrix, pair in want:
        case = [r for r in rows if r["matrix"] == matrix and r["pair"] == pair]
        bench.payoffs(case)
        best = min((r for r in case if r["provider"] in ("cusparse", "t2_triton_unfused") and r["status"] == "ok"),
                   key=lambda r: r["ms"])
        for r in case:
            if r["provider"] == "t3_triton_fused":
                # what the fused code does once (inspector, prepare) beyond the best unfused code's setup
                one_off = r["inspector_ms"] + (r["setup_ms"] or 0) - best["setup_ms"]
                assert r["one_off_ms"] == pytest.approx(one_off)
                if r["ms"] < best["ms"]:
                    assert r["payoff_runs"] == pytest.approx(max(one_off, 0) / (best["ms"] - r["ms"]))
                else:
                    assert r["payoff_runs"] is None
    text = bench.summary(rows)
    assert "poisson2d" in text and "powerlaw" in text and "sptrsv_sptrsv" in text


# ------------------------------------------------------------------ the figure and the pictures

def test_markdown_table_cells():
    """One row of each kind, with known times: the best executor per schedule, the ratios and
    their bold, "n/a" for what is missing, and the one-off columns."""
    rows = [_row("poisson3d", "sptrsv_spmv", "t2_triton_unfused", 7.81),
            _row("poisson3d", "sptrsv_spmv", "t3_triton_fused", 0.3, "wavefront", "levels"),
            _row("poisson3d", "sptrsv_spmv", "t3_triton_fused", 0.25, "wavefront", "dataflow"),
            _row("poisson3d", "sptrsv_spmv", "t3_triton_fused", 0.24, "lbc", "dataflow"),
            _row("poisson3d", "sptrsv_spmv", "t3_triton_fused", 0.2, "sparse_fusion", "dataflow",
                 inspector_ms=2800.0, setup_ms=2300.0),
            _row("poisson3d", "sptrsv_spmv", "cusparse", 0.9),
            _row("poisson3d", "sptrsv_spmv", "scipy", math.nan, status="n/a: no SciPy here"),
            _row("poisson3d", "sptrsv_spmv", "cusparse", 0.5, dtype="float32")]
    for r in rows:
        r["size"] = 100
    rows[4]["payoff_runs"] = 12345.6
    lines = bench.markdown_table(rows).splitlines()
    assert lines[0].startswith("| matrix | pair | t2 unfused | t3 wavefront | t3 LBC | t3 sparse fusion |")
    assert lines[2] == ("| 3D Poisson 100³ | sptrsv_spmv | 7.81 | 0.25 | 0.24 | 0.2 | 0.9 | n/a | n/a | **4.50×** | "
                        "**1.25×** | **1.20×** | 2.8 + 2.3 | 12,346 |")
    assert len(lines) == 3           # the float32 case has no t3 row: no line
    rows[1]["ms"], rows[2]["ms"], rows[3]["ms"], rows[5]["ms"] = 0.203, 0.203, 0.09, 0.79
    brief = bench.markdown_table(rows, full=False).splitlines()
    assert brief[2] == "| 3D Poisson 100³ | sptrsv_spmv | 7.81 | 0.203 | 0.090 | 0.2 | 0.79 | 3.95× | 1.01× | 0.45× |"
    for r in rows:
        r["matrix"], r["size"] = "powerlaw", 250_000
    assert bench.markdown_table(rows, full=False).splitlines()[2].startswith("| power-law, 250,000 nodes | sptrsv_spmv |")


def test_readme_tables_are_the_recorded_data():
    """The README's float64 and float32 sparse-fusion tables are what `python -m tiers table
    sparse_fusion` makes of the recorded file the README names: no number in them is typed by
    hand. (The named file, not the newest: a local `bench --quick` may write newer ones.)"""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    named = re.findall(r"`(figures/data/sparse_fusion_[^`]+\.json)` holds every row", readme)
    assert len(named) == 1, named
    rows = json.loads((root / named[0]).read_text())["rows"]
    assert bench.markdown_table(rows, "float64") in readme
    assert bench.markdown_table(rows, "float32", full=False) in readme


def test_h200_tables_are_the_recorded_data():
    """The H200 table beside the README's is what `tiers table --data FILE` makes of the file it names."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs" / "sparse_fusion_h200_table.md").read_text()
    named = set(re.findall(r"`(figures/data/table_h200_[^`]+\.json)` holds every row", doc))
    assert len(named) == 1, named
    header, rows = load_rows("sparse_fusion", root / named.pop())
    assert header["environment"]["device"] == "NVIDIA H200"
    assert bench.markdown_table(rows, "float64") in doc
    assert bench.markdown_table(rows, "float32", full=False) in doc


def test_load_rows_takes_a_file_or_a_folders_newest(tmp_path):
    """A folder gives its newest day's file, ties in name order whatever the listing; a file gives itself."""
    def put(name, tag):
        (tmp_path / name).write_text(json.dumps({"environment": {"tag": tag}, "rows": [{"tag": tag}]}))
    put("sparse_fusion_b_2026-12-07.json", "b")
    put("sparse_fusion_a_2026-12-07.json", "a")
    put("sparse_fusion_c_2026-12-06.json", "c")
    put("other_2026-12-09.json", "o")
    assert load_rows("sparse_fusion", tmp_path)[1] == [{"tag": "b"}]
    header, rows = load_rows("sparse_fusion", tmp_path / "sparse_fusion_c_2026-12-06.json")
    assert header == {"environment": {"tag": "c"}} and rows == [{"tag": "c"}]
    with pytest.raises(FileNotFoundError, match="no recorded data"):
        load_rows("sparse_fusion", tmp_path / "empty")


def test_figure_title_dates_the_rows_drawn():
    """A merged table's title gives the days its rows were measured, not its first run's date."""
    header = {"environment": {"device": "G", "torch": "0", "triton": "0", "date": "2000-01-01"}}
    day = lambda d: {"measured_utc": f"{d}T12:00:00+00:00"}
    assert figures._title(header).endswith("· 2000-01-01")
    assert figures._title(header, [day("2026-12-05"), day("2026-12-05")]).endswith("· 2026-12-05")
    assert figures._title(header, [day("2026-12-05"), {}, day("2026-12-04")]).endswith("· 2026-12-04 to 2026-12-05")


def test_speedup_figure_draws_the_recorded_numbers(tmp_path):
    rows, want = _synthetic_rows(np.random.default_rng(7))
    env = {"device": "Test GPU", "torch": "0", "triton": "0", "cuda": "", "date": "2000-01-01"}
    write_rows(rows, "sparse_fusion", env, tmp_path)
    fig = figures.sparse_fusion_speedup(tmp_path)
    assert fig._suptitle.get_text().endswith("2000-01-01")          # no row says when: the file's date
    axes = [ax for ax in fig.axes if ax.patches]
    assert len(axes) == 2
    for ax, matrix in zip(axes, ("poisson2d", "powerlaw")):
        heights = sorted(round(p.get_height(), 9) for p in ax.patches)
        expect = sorted(round(want[(matrix, pair)][k], 9) for pair in bench.PAIRS[:3]
                        for k in ("over_unfused", "over_wavefront", "over_lbc"))
        assert heights == expect
        assert matrix in ax.get_title()
    plt.close(fig)


def test_draw_all_skips_a_figure_without_data(tmp_path, capsys):
    paths = figures.draw_all(tmp_path / "out", data_dir=tmp_path)
    assert paths == []
    assert "skipped sparse_fusion_speedup" in capsys.readouterr().out
    with pytest.raises(FileNotFoundError):
        figures.sparse_fusion_speedup(tmp_path)


@pytest.mark.parametrize("pair", bench.PAIRS)
def test_dag_picture_has_every_iteration_in_its_kernel_colour(pair):
    from matplotlib.colors import to_hex

    from tiers.sparse_dags import joint_dag

    A = poisson2d(5)
    dag = joint_dag(pair, *bench.operands(pair, A))
    ax = figures.draw_dag(dag)
    pts = ax.collections[1]   # the edges come first, then the vertices
    assert len(pts.get_offsets()) == dag.n
    colors = [to_hex(c) for c in pts.get_facecolors()]
    assert colors == [figures.KERNEL_COLORS[0]] * dag.n1 + [figures.KERNEL_COLORS[1]] * dag.n2
    assert len(ax.collections[0].get_segments()) == dag.edges - int((dag.idx == np.repeat(
        np.arange(dag.n), np.diff(dag.ptr))).sum())
    plt.close(ax.figure)


@pytest.mark.parametrize("kind", bench.KINDS)
def test_schedule_picture_has_one_cell_per_iteration(kind):
    from tiers.fusion_schedules import inspect

    A = powerlaw_laplacian(30, m=2, seed=_seed(kind) % 100)
    s = inspect("sptrsv_spmv", *bench.operands("sptrsv_spmv", A), kind=kind)
    ax = figures.draw_schedule(s)
    # one cell per iteration, one outline per partition, two legend swatches
    assert len(ax.patches) == s.n1 + s.n2 + s.partitions() + 2
    assert kind in ax.get_title()
    plt.close(ax.figure)


def test_recorded_lists_the_figures_that_have_data(tmp_path):
    assert figures.recorded(tmp_path) == []
    env = {"device": "Test GPU", "torch": "0", "triton": "0", "cuda": "", "date": "2000-01-01"}
    rows, _ = _synthetic_rows(np.random.default_rng(3))
    write_rows(rows, "sparse_fusion", env, tmp_path)
    assert figures.recorded(tmp_path) == ["sparse_fusion_speedup"]
    paths = figures.draw_all(tmp_path / "out", data_dir=tmp_path)
    assert [p.name for p in paths] == ["sparse_fusion_speedup.png"] and paths[0].stat().st_size > 10_000
