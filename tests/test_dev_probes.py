"""The clock-stamp probes in dev/sparse_fusion/ (stamps.py for the factor kernel, flow_stamps.py for
the dataflow kernel) copy t3's kernels by text substitution and launch the copies on a lent GPU.
A kernel change that moves one of their anchors used to be found there, at the cost of a call;
here it fails on the CPU. The stand-ins for the timer (Triton's interpreter runs no inline PTX)
make the stamps meaningless, so only the copies, their launch and the analysis' reading of the
records are checked."""
import pathlib
import shutil
import subprocess

import numpy as np
import pytest
import torch

from tiers import fusion_schedules as fs
from tiers import sparse_matrices as sm
from tiers.bench import sparse_fusion as bench
from tiers.kernels.sparse_fusion_executors import records
from tiers.t3_triton_fused import sparse_fusion as t3

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEV = ROOT / "dev" / "sparse_fusion"
SCRIPTS = [ROOT / ".ci" / "run", *sorted((ROOT / "dev").rglob("*.sh"))]


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash to parse with")
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_shell_scripts_parse(script):
    """The shell scripts CI and a lent GPU run parse (bash -n): a call that fails on a syntax error
    costs a GPU session's start. On 2026-12-06 gpu_next.sh's comment block lost three '#' marks."""
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.fixture
def probes(monkeypatch):
    monkeypatch.syspath_prepend(str(DEV))
    import flow_stamps
    import stamps
    return stamps, flow_stamps


def test_stamped_copies_find_their_anchors(probes):
    stamps, flow_stamps = probes
    assert hasattr(stamps.stamped_module(), "_syncfree_clk")
    assert hasattr(flow_stamps.stamped_module(), "_dataflow_clk")


@pytest.mark.skipif(torch.cuda.is_available(), reason="runs CPU tensors in Triton's interpreter")
def test_flow_stamps_reads_each_streams_records(probes, monkeypatch):
    """On the 27-point grid, whose streams' records differ in width (STREAM_CHUNKS), the stamped
    copy runs through the call's own path, gives t0's results and stamps every block; the
    (block, producer) pairs the analysis reads from the packed records are those of the plan with
    one width (records.record_reads), and each block's predecessor in its program lies in its own
    stream."""
    _, flow_stamps = probes
    monkeypatch.setattr(t3, "looks_early", lambda schedule, mats, tables: True)
    A = sm.poisson3d(3, points=27)
    mats = bench.operands("sptrsv_spmv", A)
    b = torch.rand(A.shape[0], dtype=torch.float64, generator=torch.Generator().manual_seed(3)) + 0.5
    s = fs.inspect("sptrsv_spmv", *mats, kind="sparse_fusion")
    refs = bench.reference("sptrsv_spmv", mats, b.numpy())
    pairs = {}
    kernel = flow_stamps.stamped_module()._dataflow_clk
    for own in (True, False):
        monkeypatch.setattr(t3, "STREAM_CHUNKS", own)
        run = t3.prepare("sptrsv_spmv", *mats, like=b, executor="dataflow", schedule=s, claim="stride",
                         programs_per_sm=2)
        seen = {}
        out, clk = flow_stamps.call_clk(run, b, kernel, seen)
        ok, err, msg = bench.check(out, refs, "float64")
        assert ok, (own, err, msg)
        blocks = run.plan[0]
        assert (seen["CHUNK0"], seen["CHUNK1"]) == ((16, 32) if own else (0, 0))
        assert (clk.reshape(blocks, flow_stamps.STAMPS)[1:, 0] > 0).all()       # T0 = block + program
        blk, _, prod, _ = records.record_reads(run.plan[1], blocks, run.block_rows, run.slot_stride, run.tables.n1)
        assert len(blk) and (prod >= 0).all() and (prod < blocks).all()
        pairs[own] = set(zip(blk.tolist(), prod.tolist()))
        prev = flow_stamps.program_before(blocks, seen["programs"], seen)
        split, has = seen["SPLIT_AT"], prev >= 0
        assert ((prev[has] < split) == (np.flatnonzero(has) < split)).all() and (prev[has] < np.flatnonzero(has)).all()
    assert pairs[True] == pairs[False]


def test_once_cost_hashes_the_plan_profiled_or_not(tmp_path, monkeypatch):
    """once_cost.py's hash is what an A/B of a host-side change compares: `--profile` calls each
    step four more times, and the hash it reports must stay the first call's plan; another kind's
    schedule, or another pair, must hash differently."""
    import json
    monkeypatch.syspath_prepend(str(DEV))
    import once_cost
    cases = "poisson3d27:4:spilu0_sptrsv,poisson2d:6:sptrsv_spmv"
    once_cost.main(str(tmp_path / "plain.json"), cases)
    once_cost.main(str(tmp_path / "prof.json"), cases, kinds="sparse_fusion,wavefront", profile=True)
    plain = json.loads((tmp_path / "plain.json").read_text())
    prof = json.loads((tmp_path / "prof.json").read_text())
    for case in cases.split(","):
        assert len(plain[case]) == 3 and len(prof[case]) == 5
        assert plain[case][0] == prof[case][0]
        assert prof[f"{case}/wavefront"][0] != prof[case][0]
    assert len({v[0] for v in prof.values()}) == 4
    assert "inspect by cumulative" in (tmp_path / "prof.txt").read_text()
