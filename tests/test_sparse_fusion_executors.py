"""The Triton tiers of sparse fusion beyond "matches t0" (tests/test_sparse_fusion.py checks that
for every tier with its default executor): the fused tier's executors on every pair × schedule
kind × dtype (dataflow, chains and segments on the pairs they can run), the sync-free ticket order,
the chain blocks and the segment blocks, how many launches each tier makes, what is cached between calls, and the executor
options."""
import gc
import re
import weakref
import zlib

import numpy as np
import pytest
import scipy.sparse as sp
import torch
import triton
import triton.language as tl
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.conftest import DEVICE
from tests.test_sparse_fusion import (_degenerate, _ic0_breaks_at_3, _ilu0_breaks_at_1, _randomised, factor_pattern,
                                      matrix, operands, unsymmetric_operands, values_of)
from tiers import fusion_schedules as fs
from tiers import registry
from tiers import sparse_dags as sd
from tiers import sparse_matrices as sm
from tiers import validation
from tiers.kernels import sparse_rows as rows
from tiers.t0_numpy import sparse_fusion as t0_sparse_fusion
from tiers.t2_triton_unfused import sparse_fusion as t2
from tiers.t3_triton_fused import sparse_fusion as t3
from tiers.kernels.sparse_fusion_executors import bands as t3_bands
from tiers.kernels.sparse_fusion_executors import chains as t3_chains
from tiers.kernels.sparse_fusion_executors import flat as t3_flat
from tiers.kernels.sparse_fusion_executors import launch as t3_launch
from tiers.kernels.sparse_fusion_executors import lean as t3_lean
from tiers.kernels.sparse_fusion_executors import levels as t3_levels
from tiers.kernels.sparse_fusion_executors import records as t3_records
from tiers.kernels.sparse_fusion_executors import tickets as t3_tickets
from tiers.tolerances import assert_close
from tiers.validation import interpreting

PAIRS = registry.ALGORITHMS["sparse_fusion"].entries
DTYPES = ("float64", "float32")
# one matrix per pair, of each shape of DAG: a grid, a heavy-tailed graph, a band
MATRIX_OF = {"sptrsv_spmv": ("poisson2d", 36), "spmv_sptrsv": ("powerlaw_laplacian", 40),
             "sptrsv_sptrsv": ("banded_spd", 30), "spilu0_sptrsv": ("powerlaw_laplacian", 40),
             "spic0_sptrsv": ("poisson3d_27", 27)}


def _seed(*parts):
    return zlib.crc32(repr(parts).encode())


def _vector(b, dtype):
    return torch.tensor(b, dtype=getattr(torch, dtype), device=DEVICE)


_REFERENCES: dict = {}


def _inputs_digest(pair, mats, b, dtype) -> int:
    parts = [pair.encode(), dtype.encode(), np.ascontiguousarray(b).tobytes()]
    for M in mats:
        C = sd.csr(M)
        parts += [repr(C.shape).encode(), C.indptr.tobytes(), C.indices.tobytes(), C.data.tobytes()]
    return zlib.crc32(b"|".join(parts))


def _reference(pair, mats, b, dtype, key):
    """t0 in float64 on the inputs rounded to dtype (what the tier sees), computed once per key.
    A key met again with other inputs fails here, not as a wrong reference further on."""
    digest = _inputs_digest(pair, mats, b, dtype)
    if key not in _REFERENCES:
        rounded = []
        for M in mats:
            R = M.copy()
            R.data = R.data.astype(dtype).astype(np.float64)
            rounded.append(R)
        _REFERENCES[key] = digest, registry.get("sparse_fusion", "t0_numpy", pair)(
            *rounded, b.astype(dtype).astype(np.float64))
    seen, ref = _REFERENCES[key]
    assert seen == digest, f"reference key {key!r} reused for other inputs"
    return ref


def _check(out, ref, pair, mats, dtype, what):
    pat = factor_pattern(pair, mats[0])
    assert len(out) == 2
    for k, (o, r) in enumerate(zip(out, ref)):
        is_factor = k == 0 and pat is not None
        assert o.dtype == getattr(torch, dtype) and o.device.type == DEVICE
        assert_close(values_of(o, pat if is_factor else None), values_of(r), dtype, f"{what} result {k}")


def _problem(pair, seed=0):
    gen, size = MATRIX_OF[pair]
    mats = operands(pair, matrix(gen, size, seed))
    b = np.random.default_rng(_seed(pair, seed)).standard_normal(mats[0].shape[0])
    return mats, b


_SCHEDULES: dict = {}


def _schedule(pair, mats, kind, seed=0):
    """The schedule of _problem(pair, seed), inspected once: the tests reuse it, as intended."""
    if (pair, kind, seed) not in _SCHEDULES:
        _SCHEDULES[pair, kind, seed] = fs.inspect(pair, *mats, kind=kind, workers=3)
    return _SCHEDULES[pair, kind, seed]


# ---------------------------------------------------------------- both executors against t0

# the sync-free kernel with the schedule's own ticket order once per schedule (in float64: the
# order does not depend on the dtype)
EXECUTOR_CASES = [pytest.param(pair, kind, ex, tickets, dt, id=f"{pair}-{kind}-{ex}-{tickets}-{dt}")
                  for pair in PAIRS for kind in fs.KINDS
                  for ex, tickets, dts in (("levels", "dag", DTYPES), ("syncfree", "dag", DTYPES),
                                           ("syncfree", "schedule", ("float64",)), ("dataflow", "dag", DTYPES),
                                           ("dataflow", "schedule", ("float64",)), ("dataflow", "alap", ("float64",)),
                                           ("dataflow", "mid", ("float32",)), ("dataflow", None, ("float64",)),
                                           ("chains", "dag", DTYPES),
                                           ("segments", "dag", DTYPES), ("bands", None, DTYPES))
                  for dt in dts if ex in t3.executors_for(pair)]


@pytest.mark.parametrize("pair,kind,executor,tickets,dtype", EXECUTOR_CASES)
def test_t3_executor_matches_t0(pair, kind, executor, tickets, dtype):
    mats, b = _problem(pair)
    s = _schedule(pair, mats, kind)
    run = t3.prepare(pair, *mats, like=_vector(b, dtype), schedule=s, executor=executor, tickets=tickets)
    _check(run(_vector(b, dtype)), _reference(pair, mats, b, dtype, (pair, dtype)), pair, mats, dtype,
           f"t3 {executor}/{tickets} {pair} {kind}")


UNSYMMETRIC_EXECUTOR_CASES = [pytest.param(pair, ex, fs.KINDS[(i + j) % len(fs.KINDS)], DTYPES[(i + j) % 2],
                                           id=f"{pair}-{ex}")
                              for i, pair in enumerate(PAIRS) for j, ex in enumerate(t3.executors_for(pair))]


@pytest.mark.parametrize("pair,executor,kind,dtype", UNSYMMETRIC_EXECUTOR_CASES)
def test_t3_executor_on_unsymmetric_patterns(pair, executor, kind, dtype):
    """Every executor on a pair whose matrices share no pattern, or an unsymmetric ILU(0), with
    dense rows or columns and negative pivots (tests/test_sparse_fusion.py's unsymmetric_operands):
    the rules that pick a layout from the pattern (held rows, their grid, stages) meet patterns
    that no stencil made."""
    n = 60
    mats = unsymmetric_operands(pair, n, _seed("unsymmetric", pair))
    b = np.random.default_rng(_seed("unsymmetric", pair, "b")).standard_normal(n)
    s = fs.inspect(pair, *mats, kind=kind, workers=3)
    run = t3.prepare(pair, *mats, like=_vector(b, dtype), schedule=s, executor=executor)
    _check(run(_vector(b, dtype)), _reference(pair, mats, b, dtype, ("unsymmetric", pair, dtype)), pair, mats,
           dtype, f"t3 {executor} {pair} {kind} unsymmetric")


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("gen", tuple(sm.GENERATORS))
def test_dataflow_on_rcm_orderings(gen, pair):
    """The dataflow executor on every generator in reverse Cuthill–McKee order (sm.reorder): the
    rules that read a layout from the pattern (lean rows, held grids, stages, flat records) meet
    the grids renumbered."""
    A, _ = sm.reorder(matrix(gen, {"poisson2d": 49, "poisson3d_27": 27}.get(gen, 64), 3), "rcm")
    mats = operands(pair, A)
    b = np.random.default_rng(_seed("rcm", gen, pair)).standard_normal(A.shape[0])
    v = _vector(b, "float64")
    run = t3.prepare(pair, *mats, like=v, schedule=fs.inspect(pair, *mats, kind="sparse_fusion"), executor="dataflow")
    _check(run(v), _reference(pair, mats, b, "float64", ("rcm", gen, pair)), pair, mats, "float64",
           f"dataflow {gen} rcm {pair}")


@pytest.mark.parametrize("tier_executor", ["t2", "levels", "syncfree", "dataflow", "chains", "segments"])
def test_hub_rows_longer_than_many_chunks(tier_executor):
    """A power-law graph's hub rows hold far more non-zeros than one CHUNK: their loops go round
    many times, in SpMV, in the solves and in IC(0)'s dot products."""
    A = sm.powerlaw_laplacian(150, m=2, seed=3)
    assert np.diff(A.indptr).max() > 4 * max(t3.CHUNK, t2.CHUNK)
    rng = np.random.default_rng(_seed("hub"))
    for pair in ("sptrsv_spmv", "spic0_sptrsv" if tier_executor not in ("dataflow", "chains", "segments") else "spmv_sptrsv"):
        mats = operands(pair, A)
        b = rng.standard_normal(A.shape[0])
        v, s = _vector(b, "float64"), fs.inspect(pair, *mats, workers=2)
        if tier_executor == "t2":
            out = registry.get("sparse_fusion", "t2_triton_unfused", pair)(*mats, v, schedule=s)
        else:
            out = t3.prepare(pair, *mats, like=v, schedule=s, executor=tier_executor)(v)
        _check(out, _reference(pair, mats, b, "float64", ("hub", pair)), pair, mats, "float64",
               f"{tier_executor} {pair}")


def _arrow(n, seed):
    """SPD, a few random couplings plus a dense last row and column: tril's and A's last rows hold
    all n entries, many trips of the tail loops' wide stage (32·CHUNK entries a trip, or fewer)."""
    import scipy.sparse as sps
    rng = np.random.default_rng(seed)
    i = rng.integers(0, n, 3 * n)
    j = rng.integers(0, n, 3 * n)
    M = sps.coo_matrix((rng.uniform(-1, 1, 3 * n), (i, j)), shape=(n, n)).tocsr()
    last = sps.coo_matrix((rng.uniform(-1, 1, n), (np.full(n, n - 1), np.arange(n))), shape=(n, n)).tocsr()
    M = M + M.T + last + last.T
    return sps.csr_matrix(M + sps.diags(abs(M).sum(1).A1 + 1.0))


def test_wide_stage_only_where_a_row_needs_it():
    from tiers.kernels.sparse_rows import row_tables
    grid = operands("sptrsv_spmv", sm.poisson2d(12))
    arrow = operands("sptrsv_spmv", _arrow(100, 1))
    assert not row_tables("sptrsv_spmv", *grid).wide(t3.CHUNK)
    assert row_tables("sptrsv_spmv", *arrow).wide(t3.CHUNK) and row_tables("sptrsv_spmv", *arrow).longest == 100


@pytest.mark.parametrize("tier_executor", ["t2", "levels", "syncfree", "dataflow", "chains", "segments"])
def test_rows_of_several_wide_trips(tier_executor):
    n = 4 * max(t3.CHUNK, t2.CHUNK) + 32 * max(t3.CHUNK, t2.CHUNK) + 37    # a full wide trip, then part of one
    A = _arrow(n, _seed("arrow"))
    rng = np.random.default_rng(_seed("arrow", "b"))
    # the trips do not depend on the dtype: one dtype per pair covers both at half the interpreter time
    for pair, dtype in (("sptrsv_spmv", "float64"), ("spmv_sptrsv", "float32")):
        mats = operands(pair, A)
        assert max(np.diff(M.indptr).max() for M in mats) == n
        b = rng.standard_normal(n)
        v, s = _vector(b, dtype), fs.inspect(pair, *mats, workers=2)
        if tier_executor == "t2":
            out = registry.get("sparse_fusion", "t2_triton_unfused", pair)(*mats, v, schedule=s)
        else:
            out = t3.prepare(pair, *mats, like=v, schedule=s, executor=tier_executor)(v)
        _check(out, _reference(pair, mats, b, dtype, ("arrow", pair, dtype)), pair, mats, dtype,
               f"{tier_executor} {pair} {dtype}")


DATAFLOW_TRIP = 32 * t3.CHUNK // t3.WIDE_TRIP_DIV     # the dataflow executor's narrower wide trips


@pytest.mark.parametrize("n", sorted({4 * t3.CHUNK, 4 * t3.CHUNK + 1, 4 * t3.CHUNK + DATAFLOW_TRIP,
                                      4 * t3.CHUNK + DATAFLOW_TRIP + 1, 36 * t3.CHUNK, 36 * t3.CHUNK + 1}))
def test_wide_stage_edges(n):
    """Rows that end exactly where the side-by-side stage ends, one past it (a wide trip of one
    entry), exactly one wide trip past it, and one entry into a second trip — for t2's trips and
    for the dataflow executor's narrower ones (WIDE_TRIP_DIV)."""
    A = _arrow(n, _seed("edges", n))
    b = np.random.default_rng(_seed("edges", "b", n)).standard_normal(n)
    for pair in ("sptrsv_spmv", "spmv_sptrsv"):
        mats = operands(pair, A)
        v, s = _vector(b, "float64"), fs.inspect(pair, *mats, workers=2)
        for name, out in (("t2", registry.get("sparse_fusion", "t2_triton_unfused", pair)(*mats, v, schedule=s)),
                          ("dataflow", t3.prepare(pair, *mats, like=v, schedule=s, executor="dataflow")(v))):
            _check(out, _reference(pair, mats, b, "float64", ("edges", pair, n)), pair, mats, "float64",
                   f"{name} {pair} n={n}")


@pytest.mark.parametrize("executor", ["dataflow", "chains", "segments"])
@pytest.mark.parametrize("per_sm", [1, 2])
def test_persistent_programs(executor, per_sm):
    """Persistent programs (a few per SM, each taking tickets until none is left) give the same
    numbers as one program per block, on every pair they can run (the dataflow executor's ticket
    counter here; its striding programs in test_dataflow_claim_stride)."""
    for pair in ("sptrsv_spmv", "spmv_sptrsv", "sptrsv_sptrsv"):
        mats, b = _problem(pair)
        run = t3.prepare(pair, *mats, like=_vector(b, "float64"), schedule=_schedule(pair, mats, "wavefront"),
                         executor=executor, programs_per_sm=per_sm,
                         **({"claim": "counter"} if executor == "dataflow" else {}))
        assert run.plan[0] >= 2 * per_sm and t3_launch._programs(run.plan[0], per_sm, torch.device("cpu")) == per_sm
        _check(run(_vector(b, "float64")), _reference(pair, mats, b, "float64", (pair, "float64")), pair, mats,
               "float64", f"{executor} P={per_sm} {pair}")


@pytest.mark.parametrize("ahead", [0, 1, 2])
def test_dataflow_tickets_ahead(ahead):
    """However far ahead a persistent dataflow program takes its tickets, the numbers are t0's:
    on a grid, a graph with rows longer than a record's slots, and a band; one program per
    block ignores the option."""
    for pair in ("sptrsv_spmv", "spmv_sptrsv", "sptrsv_sptrsv"):
        mats, b = _problem(pair)
        for per_sm, claim in ((2, "counter"), (2, "stride"), (0, None)):
            run = t3.prepare(pair, *mats, like=_vector(b, "float64"), schedule=_schedule(pair, mats, "wavefront"),
                             executor="dataflow", programs_per_sm=per_sm, tickets_ahead=ahead, claim=claim)
            assert run.tickets_ahead == ahead and run.claim == (claim or "counter")
            _check(run(_vector(b, "float64")), _reference(pair, mats, b, "float64", (pair, "float64")), pair, mats,
                   "float64", f"dataflow ahead={ahead} P={per_sm} {claim} {pair}")


@pytest.mark.parametrize("ahead", [0, 2])
def test_dataflow_claim_stride(ahead):
    """Programs striding over the blocks instead of taking tickets give t0's numbers (in the
    interpreter one program takes every block in order; the GPU smoke check runs many); striding
    needs persistent programs."""
    for pair in ("sptrsv_spmv", "spmv_sptrsv", "sptrsv_sptrsv"):
        mats, b = _problem(pair)
        run = t3.prepare(pair, *mats, like=_vector(b, "float64"), schedule=_schedule(pair, mats, "wavefront"),
                         executor="dataflow", tickets_ahead=ahead, claim="stride")
        assert run.claim == "stride"
        _check(run(_vector(b, "float64")), _reference(pair, mats, b, "float64", (pair, "float64")), pair, mats,
               "float64", f"dataflow stride ahead={ahead} {pair}")
    assert t3.tuning_defaults("dataflow")["claim"] == t3.CLAIM == "stride"
    with pytest.raises(ValueError, match="claim must be one of counter, stride or None, got 'static'"):
        t3.prepare(pair, *mats, like=_vector(b, "float64"), executor="dataflow", claim="static")
    with pytest.raises(ValueError, match=r"claim='stride' .* needs programs_per_sm > 0"):
        t3.prepare(pair, *mats, like=_vector(b, "float64"), executor="dataflow", claim="stride", programs_per_sm=0)


@pytest.mark.parametrize("per_sm, claim", [(0, None), (2, "counter"), (2, "stride")])
def test_flag_executor_claims(per_sm, claim):
    """The flag executor gives t0's numbers with one program per block (a ticket each, the
    default), persistent programs taking tickets, and programs striding over the blocks (in the
    interpreter one program takes every block in order; the GPU smoke check runs many): on every
    pair, the factor pairs with held and with streamed rows among them."""
    for pair in sd.PAIR_NAMES:
        mats, b = _problem(pair)
        run = t3.prepare(pair, *mats, like=_vector(b, "float64"), schedule=_schedule(pair, mats, "wavefront"),
                         executor="syncfree", programs_per_sm=per_sm, claim=claim)
        assert run.programs_per_sm == per_sm and run.claim == (claim or "counter")
        _check(run(_vector(b, "float64")), _reference(pair, mats, b, "float64", (pair, "float64")), pair, mats,
               "float64", f"syncfree P={per_sm} {claim} {pair}")


def test_flag_executor_claim_defaults_and_errors():
    """The flag executor keeps one program per block by default (FLAG_PROGRAMS_PER_SM: striding
    was not faster everywhere) and polls without a nap unless given one (NAP_NS; on a GPU the nap
    is slept, in the interpreter skipped); persistent programs stride unless told to take
    tickets; striding needs persistent programs; the executors that always take tickets resolve
    any claim to the counter."""
    pair = "spilu0_sptrsv"
    mats, b = _problem(pair)
    like = _vector(b, "float64")
    assert t3.FLAG_PROGRAMS_PER_SM == 0
    assert t3.tuning_defaults("syncfree", pair) == {"block_rows": None, "nap_ns": 0, "tickets": "alap",
                                                    "programs_per_sm": 0, "claim": "counter", "fuse_rows": True}
    run = t3.prepare(pair, *mats, like=like, executor="syncfree")
    assert (run.programs_per_sm, run.claim, run.nap_ns) == (0, "counter", 0)
    napping = t3.prepare(pair, *mats, like=like, executor="syncfree", nap_ns=150)
    assert napping.nap_ns == 150
    _check(napping(like), _reference(pair, mats, b, "float64", ("flag_nap", pair)), pair, mats, "float64",
           "flag executor with a nap between polls")
    assert t3.prepare(pair, *mats, like=like, executor="syncfree", programs_per_sm=4).claim == "stride"
    with pytest.raises(ValueError, match=r"claim='stride' .* needs programs_per_sm > 0"):
        t3.prepare(pair, *mats, like=like, executor="syncfree", claim="stride", programs_per_sm=0)
    with pytest.raises(ValueError, match="claim must be one of counter, stride or None, got 'ring'"):
        t3.prepare(pair, *mats, like=like, executor="syncfree", claim="ring")
    assert t3.prepare(pair, *mats, like=like, executor="levels", claim="stride").claim == "counter"
    assert set(t3.STRIDING) == {"syncfree", "dataflow"}


class _Props:
    """An H100's properties as resident_per_sm reads them."""
    major, minor = 9, 0
    regs_per_multiprocessor = 65536
    max_threads_per_multi_processor = 2048
    shared_memory_per_multiprocessor = 233472


class _Props86(_Props):
    """An sm_86 GPU's: 16 blocks an SM at most, 1 536 threads, 100 KB of shared memory."""
    major, minor = 8, 6
    max_threads_per_multi_processor = 1536
    shared_memory_per_multiprocessor = 102400


@pytest.mark.parametrize("regs, shared, warps, expected", [
    (64, 0, 1, 32),       # 2 048 registers a warp: 8 a quarter, 32 an SM (also the sm_90 block cap)
    (72, 0, 1, 28),       # 2 304: 7 a quarter (H100: launched at 28 a SM)
    (80, 0, 1, 24),       # 2 560: 6 a quarter, not 65 536 / 2 560 = 25 (H100: 25 a SM refused as too large)
    (113, 0, 1, 16),      # 3 840: 4 a quarter (ncu on the H100: block limit registers 16)
    (32, 0, 4, 16),       # threads: 2 048 / 128
    (40, 0, 2, 24),       # 1 280 a warp: 12 warps a quarter, 48 an SM, 24 programs of 2 warps
    (16, 100_000, 1, 2),  # shared memory: 233 472 / 101 024
    (255, 0, 1, 8),       # 8 192 a warp: 2 a quarter
])
def test_resident_per_sm(regs, shared, warps, expected):
    """resident_per_sm, what a striding (cooperative) launch asks an SM to hold: registers by the
    quarter, threads, shared memory and the blocks an SM takes each bound it; the H100 cases are
    the ones measured (2026-11-27, figures/data/resident_check_*, flagstride_probe_*,
    ncu_flag_ilu27_*). On an sm_86 GPU the block cap and its threads bound it lower."""
    assert t3_launch.resident_per_sm(regs, shared, warps, _Props()) == expected
    assert t3_launch.resident_per_sm(32, 0, 1, _Props86()) == 16          # the block cap, not 48 by threads
    assert t3_launch.resident_per_sm(32, 0, 4, _Props86()) == 12          # 1 536 threads / 128


def _dataflow_options(A, pair="sptrsv_spmv"):
    mats = operands(pair, A)
    run = t3.prepare(pair, *mats, like=_vector(np.ones(A.shape[0]), "float64"), executor="dataflow",
                     claim="counter")
    return run.block_rows, run.tickets_ahead, t3.record_chunk(run.tables)


def test_dataflow_shape_and_record_chunk():
    """dataflow_shape (what the ticket counter takes; striding programs prefetch, ahead 2): a joint
    DAG of at least BUSY_ENTRIES entries a level takes its tickets two ahead, and one of at least
    WIDE_LEVELS iterations a level blocks of 8 where no row needs a tail; otherwise (4, 0).
    record_chunk: all of the longest row where it fits in RECORD_CHUNK slots, else CHUNK; where a
    row is longer than CHUNK polls re-read only pending entries. dataflow_programs: more programs
    per SM where a row takes the wide stage, fewer where records hold more than CHUNK slots. The
    benchmark records what prepare chose."""
    from tiers.bench.sparse_fusion import runner
    defaults = t3.tuning_defaults("dataflow")
    assert defaults["block_rows"] is None and defaults["tickets_ahead"] is None
    assert _dataflow_options(sm.poisson2d(6)) == (4, 0, t3.CHUNK)                # 36 rows, 11 levels: narrow
    assert _dataflow_options(sm.poisson3d(3, points=27)) == (4, 0, 32)            # rows of 27 entries
    wide = sp.identity(t3.WIDE_LEVELS, format="csr") * 2.0                        # 2 levels of WIDE_LEVELS rows,
    assert _dataflow_options(wide) == (8, 0, t3.CHUNK)                            # WIDE_LEVELS / 2 entries a level
    band = sp.diags([2.0] + [0.5] * 5, [0, 1, 2, 3, 4, 5], shape=(t3.WIDE_LEVELS,) * 2, format="csr")
    band = band + band.T                                                          # the SpMV rows: 11 entries
    busy = t3.prepare("sptrsv_spmv", sp.diags(band.diagonal(), format="csr"), band,
                      like=_vector(np.ones(t3.WIDE_LEVELS), "float64"), executor="dataflow", claim="counter")
    assert (busy.block_rows, busy.tickets_ahead) == (4, 2)        # 11 · 2048 / 2 entries a level; rows > CHUNK
    hub = sp.lil_matrix(band)
    hub[0, 1:t3_records.RECORD_CHUNK + 1] = 1.0       # an SpMV row longer than the slots (upper: no new level)
    hub = sp.csr_matrix(hub)
    hub_run = t3.prepare("sptrsv_spmv", sp.diags(hub.diagonal(), format="csr"), hub,
                         like=_vector(np.ones(t3.WIDE_LEVELS), "float64"), executor="dataflow")
    assert t3.record_chunk(hub_run.tables) == t3.CHUNK
    # dataflow_programs: more programs per SM where a row takes the wide stage, fewer where records
    # hold more than CHUNK slots (busy's rows of 11), the default where they hold CHUNK
    assert hub_run.tables.wide(t3.CHUNK) and hub_run.programs_per_sm == t3.WIDE_PROGRAMS_PER_SM
    assert t3.record_chunk(busy.tables) == 16 and busy.programs_per_sm == t3.LONG_PROGRAMS_PER_SM
    grid = t3.prepare("sptrsv_spmv", *operands("sptrsv_spmv", sm.poisson2d(6)), like=_vector(np.ones(36), "float64"),
                      executor="dataflow")
    assert t3.record_chunk(grid.tables) == t3.CHUNK and grid.programs_per_sm == t3.PROGRAMS_PER_SM
    assert len({t3.PROGRAMS_PER_SM, t3.WIDE_PROGRAMS_PER_SM, t3.LONG_PROGRAMS_PER_SM}) == 3
    assert t3.tuning_defaults("dataflow")["programs_per_sm"] is None
    assert t3.tuning_defaults("chains")["programs_per_sm"] == t3.PROGRAMS_PER_SM
    # polls re-read only pending entries where some row is longer than CHUNK (the poll loop itself
    # never turns in the interpreter, where every awaited block is done: the GPU smoke check runs it)
    for A, pending in ((sm.poisson2d(6), False), (sm.poisson3d(3), False), (sm.poisson3d(3, points=27), True),
                       (hub, True)):
        run = t3.prepare("sptrsv_spmv", *operands("sptrsv_spmv", A), like=_vector(np.ones(A.shape[0]), "float64"),
                         executor="dataflow")
        assert t3.polls_pending(run.tables) is pending
        assert run.record_shape["TAIL"] is (A is hub)     # only the hub's row is longer than its record
    A = sm.poisson2d(6)
    mats = operands("sptrsv_spmv", A)
    like = _vector(np.ones(36), "float64")
    fn = registry.get("sparse_fusion", "t3_triton_fused", "sptrsv_spmv")
    row, _ = runner(fn, "sptrsv_spmv", mats, like, None, "dataflow",
                    {"block_rows": None, "tickets": "mid", "tickets_ahead": None})
    assert row["block_rows"] == 4 and row["tickets_ahead"] == 2 and row["claim"] == "stride"   # stride: prefetch
    assert row["record_shape"] == "CHUNK=8 TAIL=False WIDE=False PENDING=False TRIP_DIV=2 FOLD=True"
    assert row["direct"] is True                          # a 6x6 grid's levels are narrow (writes_row_order)
    assert row["early"] is False                          # and so no early look (looks_early)
    row, _ = runner(fn, "sptrsv_spmv", mats, like, None, "dataflow",
                    {"block_rows": None, "tickets": "mid", "tickets_ahead": None}, {"claim": "counter"})
    assert row["block_rows"] == 4 and row["tickets_ahead"] == 0 and row["claim"] == "counter"


@pytest.mark.parametrize("direct", [True, False])
def test_dataflow_records_put_results_back_in_row_order(direct, monkeypatch):
    """The records number a block's outputs by slot; the results come back in row order, equal
    to the flag executor's, whether the kernel stores them there too or a gather does after it
    (writes_row_order), with blocks partly empty (R wider than some levels) and a right-hand
    side that kernel 1 writes (spmv_sptrsv). The outputs start poisoned, so a result that neither
    way writes fails."""
    monkeypatch.setattr(t3, "writes_row_order", lambda schedule, mats: direct)
    for pair, A in (("spmv_sptrsv", sm.poisson2d(5)), ("sptrsv_spmv", sm.poisson3d(3, points=27))):
        mats = operands(pair, A)
        b = np.random.default_rng(_seed(pair, "slots")).standard_normal(A.shape[0])
        ref = t3.prepare(pair, *mats, like=_vector(b, "float64"), executor="syncfree")(_vector(b, "float64"))
        for R in (4, 16):
            run = t3.prepare(pair, *mats, like=_vector(b, "float64"), executor="dataflow", block_rows=R)
            count, dev = run.plan
            dst = dev["dst"].cpu().numpy()
            assert run.direct is direct and count * R == len(dst) and dev["back"].numel() == 2 * A.shape[0]
            assert sorted(dst[dst >= 0].tolist()) == list(range(A.shape[0], 3 * A.shape[0]))
            for o, r in zip(run(_vector(b, "float64")), ref):
                assert_close(o, r, "float64", f"{pair} R={R} direct={direct}")


@pytest.mark.parametrize("sector", [True, False])
def test_dataflow_blocks_take_a_sector_of_slots(sector, monkeypatch):
    """With SECTOR_SLOTS a block's output slots start VEC's 32-byte sector of their own (slot_stride:
    4 float32 lanes are 8 slots apart, 2 float64 lanes 4), the rest of it unused; without, R apart.
    The results are the flag executor's either way."""
    monkeypatch.setattr(t3, "SECTOR_SLOTS", sector)
    A = sm.poisson3d(3, points=27)
    mats = operands("sptrsv_spmv", A)
    n = A.shape[0]
    b = np.random.default_rng(_seed("sector")).standard_normal(n)
    for dtype, R, stride in (("float32", 4, 8), ("float64", 2, 4), ("float64", 4, 4), ("float32", 16, 16)):
        want = stride if sector else R
        ref = t3.prepare("sptrsv_spmv", *mats, like=_vector(b, dtype), executor="syncfree")(_vector(b, dtype))
        run = t3.prepare("sptrsv_spmv", *mats, like=_vector(b, dtype), executor="dataflow", block_rows=R)
        assert not run.flat and run.slot_stride == want
        at = run.plan[1]["back"].cpu().numpy() - n           # each result's slot, past the inputs
        assert (at % want < R).all() and len(np.unique(at)) == 2 * n
        for o, r in zip(run(_vector(b, dtype)), ref):
            assert_close(o, r, dtype, f"R={R} {dtype} sector={sector}")


def test_writes_row_order_rule(monkeypatch):
    """Direct stores where the joint DAG's levels average fewer than WIDE_LEVELS iterations, the
    gather where they average more; early looks (looks_early) where they average more and no row
    is longer than CHUNK (blocks of 8), and only for striding programs."""
    mats = operands("sptrsv_spmv", sm.poisson3d(4))
    s = fs.inspect("sptrsv_spmv", *mats, kind="wavefront")
    depth = int(t3._joint(s, mats)[1].max()) + 1
    per_level = (s.n1 + s.n2) / depth
    like = _vector(np.ones(mats[0].shape[0]), "float64")
    tables = t3.prepare("sptrsv_spmv", *mats, like=like, schedule=s, executor="dataflow").tables
    monkeypatch.setattr(t3, "WIDE_LEVELS", int(per_level) + 1)
    assert t3.writes_row_order(s, mats) and not t3.looks_early(s, mats, tables)
    monkeypatch.setattr(t3, "WIDE_LEVELS", int(per_level))
    assert not t3.writes_row_order(s, mats) and t3.looks_early(s, mats, tables)
    for claim, early in (("stride", True), ("counter", False)):
        run = t3.prepare("sptrsv_spmv", *mats, like=like, schedule=s, executor="dataflow", claim=claim,
                         programs_per_sm=2)
        assert run.early is early and run.block_rows == 8
    monkeypatch.setattr(t3, "_long_records", lambda shape: False)
    monkeypatch.setattr(t3, "CHUNK", tables.longest - 1)      # a row longer than CHUNK: no blocks of 8
    assert not t3.looks_early(s, mats, tables)
    monkeypatch.setattr(t3, "CHUNK", tables.longest)
    monkeypatch.setattr(t3, "EARLY_LOOK", False)
    monkeypatch.setattr(t3, "_long_records", lambda shape: True)
    assert not t3.looks_early(s, mats, tables)


def test_early_look_on_long_records(monkeypatch):
    """looks_early's second case (_long_records): records longer than CHUNK slots a lane that hold
    every row (the 27-point grid's 32) take the pipeline on narrow levels too; records of CHUNK
    (2D and 7-point grids) and rows past their records (a hub: TAIL) do not. reads_every_slot: the
    pipeline reads each block's widths only on long records; whole_records: no kernel reads widths
    where rows pass their records."""
    monkeypatch.setattr(t3, "WIDE_LEVELS", 1 << 30)           # every level narrow: no blocks of 8
    band = sp.diags([2.0, 0.5, 0.5], [0, 1, 2], shape=(64, 64), format="csr")
    hub = sp.lil_matrix(band + band.T)
    hub[0, 1:t3_records.RECORD_CHUNK + 1] = 1.0
    hub = sp.csr_matrix(hub)
    for A, long in ((sm.poisson3d(3, points=27), True), (sm.poisson2d(6), False), (sm.poisson3d(3), False),
                    (hub, False)):
        mats = operands("sptrsv_spmv", A)
        if A is hub:
            mats = (sp.diags(hub.diagonal(), format="csr"), hub)
        like = _vector(np.ones(A.shape[0]), "float64")
        s = fs.inspect("sptrsv_spmv", *mats, kind="sparse_fusion")
        run = t3.prepare("sptrsv_spmv", *mats, like=like, schedule=s, executor="dataflow", claim="stride",
                         programs_per_sm=2)
        assert t3._long_records(run.record_shape) is long and t3.looks_early(s, mats, run.tables) is long
        assert run.early is (long and not run.flat)
        assert (run.record_shape["CHUNK"] > t3.CHUNK and not run.record_shape["TAIL"]) is long
        # the pipelined loop reads every slot of records of CHUNK slots, widths only for long ones
        assert t3.reads_every_slot(run.record_shape) is not long and run.every_slot is (run.early and not long)
        # and no widths at all where rows pass their records (the hub: TAIL)
        assert run.whole_records is ((A is hub) or run.every_slot) and run.record_shape["TAIL"] is (A is hub)
    monkeypatch.setattr(t3, "EVERY_SLOT", False)
    assert not t3.reads_every_slot(run.record_shape)


def _vector_pair_cases(matrices, seed, tag):
    """(pair, operands, right-hand side, t0's results) for the three vector pairs on each matrix."""
    for A in matrices:
        for pair in ("sptrsv_spmv", "spmv_sptrsv", "sptrsv_sptrsv"):
            mats = operands(pair, A)
            b = np.random.default_rng(seed).standard_normal(A.shape[0])
            yield pair, mats, b, _reference(pair, mats, b, "float64", (tag, A.shape[0], A.nnz, pair))


def test_dataflow_folded_rhs(monkeypatch):
    """folds_rhs: where every row's entries and right-hand side fit in the record's slots, a lane's
    right-hand side is read as one more entry slot of coefficient 1 and the lane has none of its
    own; otherwise (a row with a full record and a right-hand side, or rows longer than their
    record) it keeps its own. Either way the results are t0's, also with folding turned off."""
    grids = (sm.poisson2d(6), sm.poisson3d(3), sm.poisson3d(3, points=27))
    for pair, mats, b, ref in _vector_pair_cases(grids, 3, "fold"):
        for fold in (True, False):
            monkeypatch.setattr(t3, "FOLD_RHS", fold)
            run = t3.prepare(pair, *mats, like=_vector(b, "float64"), executor="dataflow",
                             schedule=fs.inspect(pair, *mats, kind="wavefront"))
            assert run.record_shape["FOLD"] is fold
            _check(run(_vector(b, "float64")), ref, pair, mats, "float64", f"dataflow fold={fold} {pair}")
            count, dev = run.plan
            rhs, pv = dev["rhs"].cpu().numpy(), dev["pv"].cpu().numpy()
            solved = run.tables.rhs >= 0
            assert bool((rhs >= 0).any()) is (not fold) and int((pv == -2).sum()) == (solved.sum() if fold else 0)
            a = run.record_values["a"].cpu().numpy()
            assert np.all(a[pv == -2] == 1.0)
    monkeypatch.setattr(t3, "FOLD_RHS", True)
    n = 12                       # row 8 of L reads 8 entries and b: 9 > the 8 slots of its record
    L = sp.lil_matrix(sp.diags(np.full(n, 4.0)))
    L[8, :8] = -0.25
    mats = (sp.csr_matrix(L), sp.diags(np.full(n, 2.0), format="csr"))
    b = np.random.default_rng(4).standard_normal(n)
    run = t3.prepare("sptrsv_sptrsv", *mats, like=_vector(b, "float64"), executor="dataflow")
    assert run.record_shape["CHUNK"] == 8 and not run.record_shape["TAIL"] and not run.record_shape["FOLD"]
    _check(run(_vector(b, "float64")), _reference("sptrsv_sptrsv", mats, b, "float64", ("fold", "full")),
           "sptrsv_sptrsv", mats, "float64", "dataflow, a full record and a right-hand side")


def test_dataflow_early_look(monkeypatch):
    """looks_early: a striding program reads the next blocks' records and entries before its block
    waits (_pipelined), so an entry read early may still hold the sentinel and must be polled
    again; the blocks go in pairs, so with an odd count the last pair's second block lies past
    the end and stores nothing. Results are t0's on records that fold their right-hand sides,
    keep them apart, store in row order, and on hub rows longer than the record (tail_sum), with
    block counts of both parities."""
    monkeypatch.setattr(t3, "looks_early", lambda schedule, mats, tables: True)
    monkeypatch.setattr(t3, "FLAT_RECORDS", False)        # the hub rows' records, not flat ones (reads_flat)
    parities = set()
    matrices = (sm.poisson2d(6), sm.poisson3d(3), sm.poisson3d(3, points=27), sm.powerlaw_laplacian(150, m=2, seed=3))
    for pair, mats, b, ref in _vector_pair_cases(matrices, 5, "early"):
        for fold in (True, False):
            monkeypatch.setattr(t3, "FOLD_RHS", fold)
            run = t3.prepare(pair, *mats, like=_vector(b, "float64"), executor="dataflow", claim="stride",
                             programs_per_sm=2, schedule=fs.inspect(pair, *mats, kind="wavefront"))
            assert run.early
            parities.add(run.plan[0] % 2)
            _check(run(_vector(b, "float64")), ref, pair, mats, "float64",
                   f"dataflow early look fold={fold} {pair} {run.record_shape}")
    assert parities == {0, 1}


def _claimed_meta(monkeypatch, keys, via="claimed"):
    """A list that gets, for every launch through t3's `via` (`claimed`, the dataflow kernel's;
    `_launch_claimed`, _syncfree's; it still launches), the kernel's meta-parameters named in
    `keys`."""
    launches = []
    plain = getattr(t3, via)

    def spy(kernel, run, count, args, meta, pdl=False):
        launches.append({k: meta.get(k) for k in keys})
        return plain(kernel, run, count, args, meta, pdl)

    monkeypatch.setattr(t3, via, spy)
    return launches


def test_spmv_programs_apart(monkeypatch):
    """spmv_share: where the pipeline runs (the 27-point grid's long records) the pairs with an
    SpMV run its blocks on programs of their own, in both dtypes — the plan puts kernel 1's blocks
    first and records where kernel 2's start (split_at), and the launch says which share of the
    programs takes the first stream (SHARE0: the SpMV's share where it is kernel 1, the rest
    where it is kernel 2). Not for two solves, not without the pipeline (2D grid), not with
    SPMV_SHARE empty; every result is t0's."""
    launches = _claimed_meta(monkeypatch, ("STREAMS", "SPLIT_AT", "SHARE0"))
    for shares in (dict(t3.SPMV_SHARE), {}):
        monkeypatch.setattr(t3, "SPMV_SHARE", shares)
        cases = _vector_pair_cases((sm.poisson3d(3, points=27), sm.poisson2d(6)), 6, "spmv_apart")
        for (pair, mats, b, ref), dtype in ((case, dtype) for case in cases for dtype in DTYPES):
            s = fs.inspect(pair, *mats, kind="sparse_fusion")
            like = _vector(b, dtype)
            run = t3.prepare(pair, *mats, like=like, executor="dataflow", schedule=s, claim="stride",
                             programs_per_sm=2)
            grid27 = mats[0].shape[0] == 27
            share = shares.get(pair, 0) if grid27 else 0
            assert run.early is grid27 and run.spmv_share == share
            assert share > 0 or not shares or pair == "sptrsv_sptrsv" or not grid27
            launches.clear()
            if dtype != "float64":
                ref = _reference(pair, mats, b, dtype, ("spmv_apart", dtype, mats[0].shape[0], pair))
            _check(run(like), ref, pair, mats, dtype, f"dataflow apart={share} {pair} {dtype}")
            count, dev = run.plan
            assert ("split_at" in dev) is (share > 0) and launches[-1]["STREAMS"] is (True if share else None)
            if share:
                blk_ptr, seq = t3_tickets.ticket_cut(s, mats, run.block_rows, run.tickets, ties="ids", apart=True)
                first = seq[blk_ptr[:-1]] < s.n1
                assert dev["split_at"] == first.sum() == launches[-1]["SPLIT_AT"] and first[:dev["split_at"]].all()
                assert launches[-1]["SHARE0"] == (share if pair == "spmv_sptrsv" else 256 - share)


def test_stream_records_of_their_own_width(monkeypatch):
    """stream_chunks: where the SpMV's blocks run apart on the 27-point grid, the solve's stream
    reads records of 16 slots and the SpMV's of 32 (CHUNK0, CHUNK1 in the launch, in stream
    order), each lane's slots those of the one-width plan cut to its stream's width; with
    STREAM_CHUNKS off every record is 32 wide and no widths are passed. The 7-point grid's
    streams (8 slots both) get none. Every result is t0's."""
    launches = _claimed_meta(monkeypatch, ("CHUNK", "CHUNK0", "CHUNK1"))
    monkeypatch.setattr(t3, "looks_early", lambda schedule, mats, tables: True)
    grids = (sm.poisson3d(3, points=27), sm.poisson3d(4, points=27), sm.poisson3d(4))
    for pair, mats, b, ref in _vector_pair_cases(grids, 8, "stream_chunks"):
        if pair == "sptrsv_sptrsv":
            continue
        s = fs.inspect(pair, *mats, kind="sparse_fusion")
        runs = {}
        for own in (True, False):
            monkeypatch.setattr(t3, "STREAM_CHUNKS", own)
            runs[own] = run = t3.prepare(pair, *mats, like=_vector(b, "float64"), executor="dataflow",
                                         schedule=s, claim="stride", programs_per_sm=2)
            assert run.spmv_share > 0
            launches.clear()
            _check(run(_vector(b, "float64")), ref, pair, mats, "float64", f"dataflow own widths={own} {pair}")
            assert launches[-1]["CHUNK"] == run.record_shape["CHUNK"]
        grid27 = runs[True].record_shape["CHUNK"] == 32
        want = ((16, 32) if pair == "sptrsv_spmv" else (32, 16)) if grid27 else None
        one, own = runs[False].plan[1], runs[True].plan[1]
        assert own.get("chunks") == want and "chunks" not in one
        assert (launches[-1]["CHUNK0"], launches[-1]["CHUNK1"]) == (0, 0)
        if want:
            lanes, C = own["split_at"] * runs[True].block_rows, 32
            for k in ("px", "pv"):
                full = one[k].cpu().numpy().reshape(-1, C)
                assert (full[:lanes, want[0]:] == -1).all() and (full[lanes:, want[1]:] == -1).all()
                packed = np.concatenate([full[:lanes, :want[0]].ravel(), full[lanes:, :want[1]].ravel()])
                assert (own[k].cpu().numpy() == packed).all()
    assert t3_records.stream_chunks(np.array([3, 12, 0, 14]), 2, 16) is None
    assert t3_records.stream_chunks(np.array([3, 5, 0, 27]), 2, 32) == (8, 32)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_record_reads_are_the_joint_dag(dtype, monkeypatch):
    """records.record_reads lists, from a dataflow plan's packed records, exactly the dependences
    of the joint DAG between rows of different blocks (every edge, on grids whose rows fit their
    records): with each stream's own width or one, and with float32's slots a sector apart
    (slot_stride above R)."""
    monkeypatch.setattr(t3, "looks_early", lambda schedule, mats, tables: True)
    for pair, mats, b, _ in _vector_pair_cases((sm.poisson3d(3, points=27), sm.poisson2d(5)), 5, "reads"):
        s = fs.inspect(pair, *mats, kind="sparse_fusion")
        dag = sd.joint_dag(pair, *mats)
        u, v = (np.asarray(x, np.int64) for x in dag.sources())
        for own in (True, False):
            monkeypatch.setattr(t3, "STREAM_CHUNKS", own)
            run = t3.prepare(pair, *mats, like=_vector(b, dtype), executor="dataflow", schedule=s, claim="stride",
                             programs_per_sm=2)
            count, dev = run.plan
            R, n, out = run.block_rows, run.tables.n1, run.tables.out_at
            dst = dev["dst"].cpu().numpy().astype(np.int64)
            joint = np.where(dst >= out[1], dst - out[1] + n, dst - out[0])     # lane → joint DAG id
            t, j, pt, pj = t3_records.record_reads(dev, count, R, run.slot_stride, n)
            assert (dst[pt * R + pj] >= 0).all()
            reads = set(zip(joint[pt * R + pj].tolist(), joint[t * R + j].tolist()))
            assert reads == set(zip(u.tolist(), v.tolist())), (pair, own, dtype)
            assert dtype == "float64" or run.slot_stride > R


def test_sums_each_poll(monkeypatch):
    """sums_each_poll: every block takes its sums at every poll where the pair's blocks run
    together, only the solve's stream where the SpMV runs apart (2 where it comes first,
    sptrsv_spmv; 3 where second, spmv_sptrsv), none for spmv_sptrsv on long records, none with
    SUMS_EACH_POLL off. Whichever blocks take them so (SUMS 0 to 3, on a pipelined grid with
    the SpMV apart and on a grid without the pipeline), every result is t0's."""
    assert [t3.sums_each_poll("sptrsv_sptrsv", 0, True), t3.sums_each_poll("sptrsv_spmv", 0, False),
            t3.sums_each_poll("sptrsv_spmv", 64, True), t3.sums_each_poll("spmv_sptrsv", 80, False),
            t3.sums_each_poll("spmv_sptrsv", 80, True)] == [1, 1, 2, 3, 0]
    monkeypatch.setattr(t3, "SUMS_EACH_POLL", False)
    assert t3.sums_each_poll("sptrsv_spmv", 0, False) == 0
    monkeypatch.undo()
    for pair, mats, b, ref in _vector_pair_cases((sm.poisson3d(3, points=27), sm.poisson2d(6)), 6, "sums"):
        run = t3.prepare(pair, *mats, like=_vector(b, "float64"), executor="dataflow", claim="stride",
                         programs_per_sm=2, schedule=fs.inspect(pair, *mats, kind="sparse_fusion"))
        assert run.sums == t3.sums_each_poll(pair, run.spmv_share, t3._long_records(run.record_shape))
        assert (run.spmv_share > 0) is (mats[0].shape[0] == 27 and pair != "sptrsv_sptrsv")
        for sums in range(4):
            run.sums, run.launches = sums, None           # the launches are derived again from `sums`
            _check(run(_vector(b, "float64")), ref, pair, mats, "float64", f"dataflow sums={sums} {pair}")


@triton.jit
def _late_writes_kernel(VEC, PX, A, RHS_AT, LATE, LATE_VAL, OUT, N_IN, SENT: tl.constexpr, R: tl.constexpr,
                        C: tl.constexpr, L: tl.constexpr, HOW: tl.constexpr):
    """A block of R rows reads VEC at PX [R, C] (−1: none) and its right-hand sides at RHS_AT once
    (vec_look_at), then the L values at LATE are written, as another program would write them, and
    the block waits: HOW 0, vec_await_at polling what is pending; 1, polling every entry again; 2,
    vec_await_dot. rhs + Σ a·x per row goes to OUT."""
    r = tl.arange(0, R)
    e = r[:, None] * C + tl.arange(0, C)[None, :]
    px, a, rhs_at = tl.load(PX + e), tl.load(A + e), tl.load(RHS_AT + r)
    xp, rp = VEC + px, VEC + rhs_at
    x, rhs = rows.vec_look_at(xp, px >= 0, rp, rhs_at >= 0)
    j = tl.arange(0, L)
    tl.store(VEC + tl.load(LATE + j), tl.load(LATE_VAL + j))
    if HOW == 2:
        s = rows.vec_await_dot(a, x, xp, px, px >= 0, rhs, rp, rhs_at, rhs_at >= 0, N_IN, SENT)
    else:
        x, rhs = rows.vec_await_at(x, xp, px, px >= 0, rhs, rp, rhs_at, rhs_at >= 0, N_IN, SENT, 0, HOW == 0)
        s = rhs + tl.sum(a * x, 1)
    tl.store(OUT + r, s)


@pytest.mark.parametrize("how", [0, 1, 2])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_awaits_take_values_written_after_the_first_look(how, dtype, seed):
    """The waits of the dataflow records (vec_await_at with pending or whole polls, vec_await_dot)
    on a block whose first look finds some entries and right-hand sides still holding the
    sentinel, written only after it: the interpreter runs one program at a time, so a wait there
    otherwise never polls twice. Inputs (positions below N_IN) are never awaited, even where their
    bits are the sentinel's; every row's sum is the one of the values finally written."""
    rng = np.random.default_rng(seed)
    R, C, n_in, n_out, L = 4, 8, 16, 16, 8
    tdt = getattr(torch, dtype)
    final = rng.standard_normal(n_in + n_out)
    late = rng.choice(np.arange(n_in, n_in + n_out), size=L, replace=False)
    vec = torch.tensor(final, dtype=tdt)
    vec.view(t3.SENTINEL_BITS[tdt])[torch.from_numpy(late)] = t3.SENTINEL[tdt]
    px = rng.integers(-1, n_in + n_out, size=(R, C))
    rhs_at = rng.integers(-1, n_in + n_out, size=R)
    px[px == n_in - 1], rhs_at[rhs_at == n_in - 1] = -1, -1
    px[:, 0] = late[:R]                                   # every row waits for something
    px[0, 1] = n_in - 1                                   # row 0 reads an input holding the sentinel's bits
    vec.view(t3.SENTINEL_BITS[tdt])[n_in - 1] = t3.SENTINEL[tdt]
    final[n_in - 1] = vec[n_in - 1].item()                # ... as it is (a NaN), without waiting
    rhs_at[1] = late[R]
    a = rng.standard_normal((R, C))
    x = np.where(px >= 0, final[np.maximum(px, 0)], 0.0)
    want = np.where(rhs_at >= 0, final[np.maximum(rhs_at, 0)], 0.0) + (a * x).sum(1)
    want[0] = np.nan
    dev = dict(dtype=torch.int32, device=DEVICE)
    out = torch.full((R,), 7.0, dtype=tdt, device=DEVICE)
    _late_writes_kernel[(1,)](vec.to(DEVICE), torch.tensor(px, **dev), torch.tensor(a, dtype=tdt, device=DEVICE),
                              torch.tensor(rhs_at, **dev), torch.tensor(late, **dev),
                              torch.tensor(final[late], dtype=tdt, device=DEVICE), out, n_in,
                              SENT=t3.SENTINEL[tdt], R=R, C=C, L=L, HOW=how, num_warps=1)
    got = out.cpu().double().numpy()
    assert np.isnan(got[0]) and np.allclose(got[1:], want[1:], rtol=1e-5 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("binds", [True, False])
@pytest.mark.parametrize("direct", [True, False])
def test_dataflow_launches_kept(binds, direct, monkeypatch):
    """A prepared dataflow call keeps its launches from its first call (BOUND: launch.Bound, whose
    compiled kernels' runners take the later calls on a GPU) or makes them afresh at each call;
    either way every call is t0's, for fresh vectors, a vector whose address is not 16-byte
    aligned (Triton specialises on it: that call goes through the JIT) and the first vector
    again, on a pipelined grid with its SpMV apart, a grid without the pipeline and a graph,
    their results stored in row order by the kernel or gathered back after it (writes_row_order
    forced)."""
    monkeypatch.setattr(t3, "BOUND", binds)
    monkeypatch.setattr(t3, "writes_row_order", lambda schedule, mats: direct)
    mats_of = (sm.poisson3d(3, points=27), sm.poisson2d(6), sm.powerlaw_laplacian(40, m=3, seed=2))
    for pair, mats, b, ref in _vector_pair_cases(mats_of, 8, "kept"):
        b2 = np.random.default_rng(9).standard_normal(b.shape[0])
        ref2 = _reference(pair, mats, b2, "float64", ("kept2", mats[0].shape[0], mats[0].nnz, pair))
        run = t3.prepare(pair, *mats, like=_vector(b, "float64"), executor="dataflow")
        what = f"kept launches={binds} direct={direct} {pair} n={b.shape[0]}"
        _check(run(_vector(b, "float64")), ref, pair, mats, "float64", what + " first call")
        assert (run.launches is not None) is binds
        if binds:
            kept = list(run.launches)
            assert (kept[2] is None) is run.direct and all(isinstance(k, t3_launch.Bound) for k in kept[:2])
            assert len(kept[1].varying) == (3 if run.flat else 5)   # slots, VEC, input (and ticket, VAL)
            assert all((k.runner is not None) is (DEVICE == "cuda") for k in kept if k is not None)
        _check(run(_vector(b2, "float64")), ref2, pair, mats, "float64", what + " second call")
        wide = torch.zeros(b.shape[0] + 1, dtype=torch.float64, device=DEVICE)
        wide[1:] = _vector(b2, "float64")
        assert wide[1:].data_ptr() % 16 == 8
        _check(run(wide[1:]), ref2, pair, mats, "float64", what + " unaligned vector")
        _check(run(_vector(b, "float64")), ref, pair, mats, "float64", what + " first vector again")
        if binds:
            assert run.launches == kept


@pytest.mark.parametrize("binds", [True, False])
def test_t2_launches_kept(binds, monkeypatch):
    """t2's prepared call keeps its level launches (BOUND: a launch.Bound per level, whose compiled
    kernel's runner takes the later calls on a GPU) or launches through the JIT at each call;
    either way every call is t0's — fresh vectors, a vector whose address is not 16-byte aligned
    and the first vector again — for a vector pair and a factor pair (whose values are copied
    per call)."""
    monkeypatch.setattr(t2, "BOUND", binds)
    for pair in ("sptrsv_spmv", "spilu0_sptrsv"):
        mats, b = _problem(pair, seed=4)
        b2 = np.random.default_rng(5).standard_normal(b.shape[0])
        ref = _reference(pair, mats, b, "float64", ("t2kept", pair))
        ref2 = _reference(pair, mats, b2, "float64", ("t2kept2", pair))
        run = t2.prepare(pair, *mats, like=_vector(b, "float64"))
        what = f"t2 kept launches={binds} {pair}"
        _check(run(_vector(b, "float64")), ref, pair, mats, "float64", what + " first call")
        assert (run.kept is not None) is binds
        if binds:
            kept = list(run.kept)
            assert len(kept) == len(run.launches) and all(isinstance(k, t3_launch.Bound) for k in kept)
            assert all((k.runner is not None) is (DEVICE == "cuda") for k in kept)
        _check(run(_vector(b2, "float64")), ref2, pair, mats, "float64", what + " second call")
        wide = torch.zeros(b.shape[0] + 1, dtype=torch.float64, device=DEVICE)
        wide[1:] = _vector(b2, "float64")
        _check(run(wide[1:]), ref2, pair, mats, "float64", what + " unaligned vector")
        _check(run(_vector(b, "float64")), ref, pair, mats, "float64", what + " first vector again")
        if binds:
            assert run.kept == kept


def test_specialisation_keys():
    """Bound's key: a tensor's dtype and 16-byte alignment, an int's being 1 or a multiple of 16
    and its type (within int32 or not), anything else as it is."""
    x = torch.zeros(8, dtype=torch.float64)
    key = t3_launch.specialisation
    assert key((x, 16, 1, 5, None)) == [(torch.float64, True), (False, True, True), (True, False, True),
                                        (False, False, True), None]
    assert key((2**31,)) != key((16,)) and key((2**31 - 16,)) == key((16,))
    assert key((x[1:],)) != key((x,)) and key((x[2:],)) == key((x,)) and key((x.float(),)) != key((x,))


class _FakeKernel:
    """Stands for a @triton.jit kernel of parameters (T, N, V, C: a constexpr) for launch.Bound:
    kernel[grid](…) is a launch through the JIT, whose compiled kernel's [grid] is a runner; both
    record what they were called with."""

    arg_names = ["T", "N", "V", "C"]

    def __init__(self):
        self.jit, self.runs = [], []

    @staticmethod
    def fn(T, N, V, C=3):
        pass

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.jit.append(args)
            return {tuple(grid) + (1,) * (3 - len(grid)): lambda *a: self.runs.append(a)}
        return launch


@pytest.mark.parametrize("varying", [None, (-1,)])
def test_bound_keeps_its_runner(varying, monkeypatch):
    """launch.Bound off the interpreter: the first call goes through the JIT and keeps the compiled
    kernel's runner, with the constexprs after the positional arguments; later calls go to the
    runner, but through the JIT where a keyed argument would specialise otherwise (here an
    unaligned tensor) or, with `varying`, where an argument outside it is not the first call's
    object (an int of the same value counts as the same)."""
    monkeypatch.setattr(t3_launch, "interpreting", lambda: False)
    k = _FakeKernel()
    go = t3_launch.Bound(k, (4,), {"C": 7, "num_warps": 1}, varying=varying)
    table, v1, v2 = torch.zeros(8), torch.zeros(8), torch.zeros(8)
    go(table, 1000, v1)
    assert len(k.jit) == 1 and go.rest == [7] and not k.runs
    go(table, 1000, v2)
    go(table, int("1000"), v1)
    assert len(k.jit) == 1 and k.runs == [(table, 1000, v2, 7), (table, 1000, v1, 7)]
    go(table, 1000, v2[1:])                             # 4-byte aligned: another specialisation
    assert len(k.jit) == 2 and len(k.runs) == 2
    go(torch.zeros(8), 1000, v1)                        # another table: keyed alike, but not the object
    assert (len(k.jit), len(k.runs)) == ((3, 2) if varying else (2, 3))
    go(table, 1016, v1)                                 # another int, keyed alike
    assert (len(k.jit), len(k.runs)) == ((4, 2) if varying else (2, 4))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen=st.sampled_from(tuple(sm.GENERATORS)), size=st.integers(1, 150), seed=st.integers(0, 1000),
       pair=st.sampled_from(PAIRS), kind=st.sampled_from(fs.KINDS), R=st.sampled_from([1, 3, 8]),
       tickets=st.sampled_from(("dag", "alap", "mid")))
def test_apart_blocks_run_kernel_by_kernel(gen, size, seed, pair, kind, R, tickets):
    """ticket_cut with `apart`: every iteration once, in blocks of at most R that hold one
    kernel's iterations; kernel 1's blocks all come first, and each kernel's iterations keep
    their ticket order; every dependence still lies in an earlier block."""
    mats = operands(pair, matrix(gen, size, seed))
    s = fs.inspect(pair, *mats, kind=kind, workers=3)
    n = s.n1 + s.n2
    blk_ptr, seq = t3_tickets.ticket_cut(s, mats, R, tickets, ties="ids", apart=True)
    order = t3_tickets.ticket_order(s, mats, tickets, ties="ids")[0]
    assert sorted(seq.tolist()) == list(range(n)) and np.diff(blk_ptr).max() <= R
    second = seq >= s.n1
    block = np.repeat(np.arange(len(blk_ptr) - 1), np.diff(blk_ptr))
    assert (np.diff(second.astype(int)) >= 0).all()                       # kernel 1 first, then kernel 2
    assert all(len(set(second[blk_ptr[t]:blk_ptr[t + 1]].tolist())) == 1 for t in range(len(blk_ptr) - 1))
    for k in (False, True):
        assert np.array_equal(seq[second == k], order[(order >= s.n1) == k])
    block_of = np.empty(n, dtype=np.int64)
    block_of[seq] = block
    u, v = sd.joint_dag(pair, *mats).sources()
    assert (block_of[u] < block_of[v]).all()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_dataflow_slots_start_as_input_then_sentinel(dtype):
    """_slots_from: one kernel writes the input vector (also a strided one) and then the sentinel's
    bit pattern in every output slot, past a multiple of its block too; without the copy it
    writes the sentinel only, and no input slot."""
    rng = np.random.default_rng(7)
    for n, total in ((5, 9), (3000, 7001)):
        full = _vector(rng.standard_normal(2 * n), dtype)
        vector = full[::2]
        slots = t3._slots_from(vector, total)
        bits = torch.int64 if slots.dtype == torch.float64 else torch.int32
        assert slots.shape == (total,) and torch.equal(slots[:n], vector)
        assert bool((slots.view(bits)[n:] == t3.SENTINEL[slots.dtype]).all())
        apart = t3._slots_from(vector, total, copy=False)
        assert apart.shape == (total,) and bool((apart.view(bits)[n:] == t3.SENTINEL[slots.dtype]).all())
        R = 4
        awaited = torch.tensor(rng.integers(0, 2, -(-(total - n) // R)), dtype=torch.int8, device=DEVICE)
        some = t3._slots_from(vector, total, awaited=awaited, R=R)
        want = awaited.bool().repeat_interleave(R)[:total - n]
        assert torch.equal(some[:n], vector)
        assert bool((some.view(bits)[n:][want] == t3.SENTINEL[slots.dtype]).all())


def test_dataflow_reads_input_apart(monkeypatch):
    """reads_input_apart: where every entry a row reads is in its record, the kernel reads the
    input from the caller's vector and the slots hold no copy of it — here NaN in its place, so
    a read of the slots instead fails; where rows are longer than their records (tail_sum) the
    input is copied as before. The slots of blocks whose outputs no row reads (`awaited` unset:
    sptrsv_spmv's y) get no sentinel — here NaN, which a row reading one would take for a value.
    Flat records (reads_flat) always read the input apart. Results are t0's, with and without the
    early look and flat records."""
    original = t3._dataflow_launches
    seen = set()

    def marked(run, flow, per_call, dtype, device):
        launches = original(run, flow, per_call, dtype, device)

        def fill(slots, vector, n, first, total, awaited):
            launches[0](slots, vector, n, first, total, awaited)
            slots = slots.view(dtype)
            copy = first == 0
            if not copy:
                slots[:n] = float("nan")
            if run.awaited is not None:
                slots[n:][~run.awaited.bool().repeat_interleave(run.slot_stride)] = float("nan")
            seen.add((copy, run.awaited is None))
        return [fill, *launches[1:]]

    monkeypatch.setattr(t3, "BOUND", False)          # the launches made at every call: each call's fill marked
    monkeypatch.setattr(t3, "_dataflow_launches", marked)
    matrices = (sm.poisson2d(6), sm.poisson3d(3), sm.poisson3d(3, points=27), sm.powerlaw_laplacian(150, m=2, seed=3))
    for early, flat in ((False, False), (True, False), (False, True)):
        monkeypatch.setattr(t3, "looks_early", lambda schedule, mats, tables: early)
        monkeypatch.setattr(t3, "FLAT_RECORDS", flat)
        hubs = (sm.powerlaw_laplacian(300, m=2, seed=3),)     # every pair has a row longer than 32
        for pair, mats, b, ref in _vector_pair_cases(hubs if flat else matrices, 9, "apart"):
            run = t3.prepare(pair, *mats, like=_vector(b, "float64"), executor="dataflow")
            assert run.flat is flat and run.split == (flat or not run.record_shape["TAIL"])
            assert run.awaited is not None or pair != "sptrsv_spmv"     # y: read by no row
            _check(run(_vector(b, "float64")), ref, pair, mats, "float64", f"dataflow apart={run.split} {pair}")
    assert {copy for copy, _ in seen} == {True, False} and (False, False) in seen


def test_dataflow_long_rows_in_ready_order(monkeypatch):
    """in_ready_order: a row longer than its record (read trip by trip by tail_sum) reads its
    entries in the order of their slots — the input first, then the outputs by ticket — and they
    are still its own entries, each with its own value; the results are t0's. The upper solve's
    hub rows ascend in column in CSR order, which a backward solve writes last first, so without
    the reordering the order check fails. HUBS_ALONE: a row of the wide stage (more than 4
    record chunks) has a block of its own, its other lanes empty. (These are the records of
    _dataflow_plan: FLAT_RECORDS off, as where programs take tickets.)"""
    monkeypatch.setattr(t3, "FLAT_RECORDS", False)
    hub = sm.powerlaw_laplacian(300, m=2, seed=3)     # its upper hub rows too are longer than a record
    reordered = 0
    for pair, mats, b, ref in _vector_pair_cases((hub,), 5, "ready"):
        run = t3.prepare(pair, *mats, like=_vector(b, "float64"), executor="dataflow")
        assert run.record_shape["TAIL"]
        count, dev = run.plan
        C, tables = run.record_shape["CHUNK"], run.tables
        px, pv = dev["px"].view(-1, C).cpu().numpy(), dev["pv"].view(-1, C).cpu().numpy()
        ent_vec, ent_val = dev["ent_vec"].cpu().numpy(), dev.get("ent_val", run.dev["ent_val"]).cpu().numpy()
        start, end = dev["start"].cpu().numpy(), dev["end"].cpu().numpy()
        dst = dev["dst"].cpu().numpy().reshape(count, run.block_rows)
        hubs = np.flatnonzero(end - start > 4 * C)
        assert len(hubs) and ((dst[hubs // run.block_rows] >= 0).sum(1) == 1).all(), f"{pair}: a hub shares its block"
        slot_of = np.r_[np.arange(tables.n1), dev["back"].cpu().numpy()]      # VEC position → slot
        for lane in np.flatnonzero(end - start > C):
            s, e = start[lane], end[lane]
            read = np.r_[px[lane], ent_vec[s + C:e]]
            vals = np.r_[pv[lane], ent_val[s + C:e]]
            assert (np.diff(read) >= 0).all(), f"{pair}: lane {lane} reads its entries out of slot order"
            own = sorted(zip(slot_of[tables.ent_aux[s:e]], tables.ent_val[s:e]))
            assert sorted(zip(read, vals)) == own, f"{pair}: lane {lane} reads entries not its own"
            reordered += int((np.diff(slot_of[tables.ent_aux[s:e]]) < 0).any())
        _check(run(_vector(b, "float64")), ref, pair, mats, "float64", f"dataflow ready order {pair}")
    assert reordered > 0        # some row's CSR order was not its slot order


def test_dataflow_block_widths():
    """A block's width is the most entry slots one of its rows uses, and a striding program reads no
    slot past it: with the padding past every width made to read an input entry, striding programs
    still give t0's numbers, while programs taking tickets, which read every slot, do not (so the
    padding was read where it may be, and the check can fail)."""
    pair = "sptrsv_spmv"
    mats, b = _problem(pair)
    ref = _reference(pair, mats, b, "float64", (pair, "float64"))
    for claim in ("stride", "counter"):
        schedule = fs.inspect(pair, *mats, kind="wavefront")        # its own: the plan below is changed
        run = t3.prepare(pair, *mats, like=_vector(b, "float64"), schedule=schedule, executor="dataflow",
                         claim=claim, programs_per_sm=2)
        count, dev = run.plan
        R, C = run.block_rows, run.record_shape["CHUNK"]
        px = dev["px"].view(count, R, C)
        used = (px >= 0).sum(2)
        width = dev["width"].long()
        assert torch.equal(width, used.max(1).values) and bool((width < C).any()) and int(width.max()) > 0
        past = (torch.arange(C, device=px.device) >= width[:, None, None]).expand(count, R, C)
        assert bool((px[past] == -1).all())
        px[past] = 0                                                  # input entry 0, never the sentinel
        run.record_values["a"].view(count, R, C)[past] = 1.0
        out = run(_vector(b, "float64"))
        if claim == "stride":
            _check(out, ref, pair, mats, "float64", "dataflow stride, padding past the widths changed")
        else:
            assert not all(np.allclose(o.cpu().numpy(), r) for o, r in zip(out, ref))


@pytest.mark.parametrize("block_rows,num_warps", [(1, 1), (4, 2), (128, 4), (128, 1)])
@pytest.mark.parametrize("executor", ["syncfree", "dataflow"])
def test_syncfree_block_sizes(block_rows, num_warps, executor):
    """Any block size gives the same numbers: one iteration per block (the longest chain of
    tickets), or blocks wider than a whole level. The dataflow executor runs one warp, and says
    so when asked for more."""
    if executor in t3.ONE_WARP and num_warps != 1:
        mats, b = _problem("sptrsv_sptrsv")
        with pytest.raises(ValueError, match=f"executor '{executor}' runs one warp per program .*num_warps={num_warps}"):
            t3.prepare("sptrsv_sptrsv", *mats, like=_vector(b, "float64"), executor=executor, num_warps=num_warps)
        return
    for pair in ("sptrsv_sptrsv", "spilu0_sptrsv")[:2 if executor == "syncfree" else 1]:
        mats, b = _problem(pair)
        run = t3.prepare(pair, *mats, like=_vector(b, "float64"), schedule=_schedule(pair, mats, "sparse_fusion"),
                         executor=executor, block_rows=block_rows, num_warps=num_warps)
        _check(run(_vector(b, "float64")), _reference(pair, mats, b, "float64", (pair, "float64")), pair, mats,
               "float64", f"R={block_rows} {pair}")


@pytest.mark.parametrize("name", ("one_row", "diagonal", "arrow", "dense3"))
@pytest.mark.parametrize("executor", t3.EXECUTORS)
def test_degenerate_matrices(executor, name):
    """Every executor on the degenerate matrices of tests/test_sparse_fusion.py (_degenerate): one
    row, no dependence, one hub row and column, every row reading every earlier one. The values
    and vectors are drawn per matrix and pair, not per executor, so the executors share the
    cached references."""
    A = _randomised(_degenerate(name), np.random.default_rng(_seed("degenerate", name)))
    for pair in (p for p in PAIRS if executor in t3.executors_for(p)):
        mats = operands(pair, A)
        b = np.random.default_rng(_seed("degenerate", name, pair)).standard_normal(A.shape[0])
        v = _vector(b, "float64")
        out = t3.prepare(pair, *mats, like=v, executor=executor)(v)
        _check(out, _reference(pair, mats, b, "float64", (name, pair)), pair, mats, "float64", f"{name} {pair}")


@pytest.mark.parametrize("steps", [1, 3, 64])
def test_chain_lengths(steps):
    """Chains cut after one link (every block a lane group), a few, or longer than any chain."""
    for pair in ("sptrsv_spmv", "sptrsv_sptrsv"):
        mats, b = _problem(pair)
        run = t3.prepare(pair, *mats, like=_vector(b, "float64"), schedule=_schedule(pair, mats, "wavefront"),
                         executor="chains", chain_steps=steps, block_rows=2)
        _check(run(_vector(b, "float64")), _reference(pair, mats, b, "float64", (pair, "float64")), pair, mats,
               "float64", f"S={steps} {pair}")


@pytest.mark.parametrize("steps", [1, 3, 128])
def test_segment_lengths(steps):
    """Pieces of one link (every row its own α), a few, or as long as the lanes allow."""
    for pair in ("sptrsv_spmv", "sptrsv_sptrsv"):
        mats, b = _problem(pair)
        for dtype in DTYPES:
            run = t3.prepare(pair, *mats, like=_vector(b, dtype), schedule=_schedule(pair, mats, "wavefront"),
                             executor="segments", chain_steps=steps, block_rows=2)
            _check(run(_vector(b, dtype)), _reference(pair, mats, b, dtype, (pair, dtype)), pair, mats, dtype,
                   f"S={steps} {pair}")


def test_segments_of_an_ill_conditioned_recurrence():
    """Links with |β| > 1 (a weak diagonal) make the scan's products grow along a piece; the
    results must still agree with the row-by-row solve to the dtype's tolerance."""
    import scipy.sparse as sp
    n = 64
    rng = np.random.default_rng(_seed("weak diagonal"))
    L = sp.diags([rng.uniform(1.0, 2.0, n), rng.uniform(-1.5, -0.5, n - 1)], [0, -1], format="csr")
    A = sp.identity(n, format="csr")
    b = rng.standard_normal(n)
    for dtype in DTYPES:
        run = t3.prepare("sptrsv_spmv", L, A, like=_vector(b, dtype), executor="segments", chain_steps=32)
        blk_ptr, blk_iter = t3_chains.segment_blocks(run.schedule, [L, A], run.tables, 4, 32)
        solve = np.repeat(np.arange(len(blk_ptr) - 1), np.diff(blk_ptr))[blk_iter < n]
        assert len(np.unique(solve)) == 2           # the solve ran as two pieces of 32 links
        _check(run(_vector(b, dtype)), _reference("sptrsv_spmv", [L, A], b, dtype, ("weak", dtype)), "sptrsv_spmv",
               [L, A], dtype, f"weak diagonal {dtype}")


# ---------------------------------------------------------------- the sync-free ticket order

@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen=st.sampled_from(tuple(sm.GENERATORS)), size=st.integers(1, 150), seed=st.integers(0, 1000),
       pair=st.sampled_from(("sptrsv_spmv", "spmv_sptrsv", "sptrsv_sptrsv")), R=st.sampled_from([1, 2, 4, 16]),
       S=st.integers(1, 40))
def test_chain_blocks_wait_only_on_the_past(gen, size, seed, pair, R, S):
    """Every iteration in exactly one slot; a chain block has one lane and at most S steps, a
    block of single iterations at most R lanes and one step; for every dependence u → v, u is in
    an earlier block, or in v's block at an earlier step — never in the same step (lanes run at
    once) nor in a later block (a program waits only for programs that already hold a ticket)."""
    mats = operands(pair, matrix(gen, size, seed))
    s = fs.inspect(pair, *mats, kind="wavefront")
    blk_ptr, steps, blk_iter = t3_chains.chain_blocks(s, mats, R, S)
    n = s.n1 + s.n2
    assert sorted(blk_iter[blk_iter >= 0].tolist()) == list(range(n))
    assert (np.diff(blk_ptr) == steps * R).all() and steps.min() >= 1 and steps.max() <= S
    block_of, step_of, lane_of = (np.empty(n, dtype=np.int64) for _ in range(3))
    for t in range(len(steps)):
        grid = blk_iter[blk_ptr[t]:blk_ptr[t + 1]].reshape(steps[t], R)
        used = grid >= 0
        assert used.any(axis=1).all()                       # no empty step
        if steps[t] > 1:
            assert not used[:, 1:].any()                    # a chain: lane 0 only
        block_of[grid[used]] = t
        step_of[grid[used]] = np.nonzero(used)[0]
    u, v = sd.joint_dag(pair, *mats).sources()
    assert ((block_of[u] < block_of[v]) | ((block_of[u] == block_of[v]) & (step_of[u] < step_of[v]))).all()


def test_chains_follow_a_stencil_row():
    """On a 2D grid in natural order each row of the solve waits last for its left neighbour, so
    the chains run along grid rows, cut every S."""
    A = sm.poisson2d(12)
    mats = operands("sptrsv_spmv", A)
    blk_ptr, steps, blk_iter = t3_chains.chain_blocks(fs.inspect("sptrsv_spmv", *mats, kind="wavefront"), mats, 4, 5)
    chains = [blk_iter[blk_ptr[t]:blk_ptr[t + 1]:4] for t in range(len(steps)) if steps[t] > 1]
    assert sorted(len(c) for c in chains) == sorted([5, 5, 2] * 12)
    for c in chains:
        assert (np.diff(c) == 1).all() and c[0] // 12 == c[-1] // 12



@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen=st.sampled_from(tuple(sm.GENERATORS)), size=st.integers(1, 150), seed=st.integers(0, 1000),
       pair=st.sampled_from(("sptrsv_spmv", "spmv_sptrsv", "sptrsv_sptrsv")), R=st.sampled_from([1, 2, 4, 16]),
       S=st.integers(1, 40), chunk=st.sampled_from([2, 16]))
def test_segment_blocks_read_only_the_past_and_the_lane_before(gen, size, seed, pair, R, S, chunk):
    """Every iteration in exactly one lane; a block is a piece of at most S links or at most R
    single iterations; for every dependence u → v, u is in an earlier block, or it is the lane
    just before v in v's block — and then v's row reads u among its first `chunk` entries (the
    scan knows its β before the wait)."""
    mats = operands(pair, matrix(gen, size, seed))
    s = fs.inspect(pair, *mats, kind="wavefront")
    tables = t3.rows.row_tables(pair, *(sd.csr(M) for M in mats))
    blk_ptr, blk_iter = t3_chains.segment_blocks(s, mats, tables, R, S, chunk)
    n = s.n1 + s.n2
    assert sorted(blk_iter.tolist()) == list(range(n))
    width = np.diff(blk_ptr)
    assert width.min() >= 1 and width.max() <= max(R, S)
    block_of = np.repeat(np.arange(len(width)), width)[np.argsort(blk_iter)]
    lane_of = (np.arange(n) - np.repeat(blk_ptr[:-1], width))[np.argsort(blk_iter)]
    u, v = sd.joint_dag(pair, *mats).sources()
    inside = block_of[u] == block_of[v]
    assert (block_of[u] <= block_of[v]).all()
    assert (lane_of[u][inside] == lane_of[v][inside] - 1).all()
    for a, b in zip(u[inside].tolist(), v[inside].tolist()):
        e0, e1 = tables.ent_ptr[b], tables.ent_ptr[b + 1]
        assert tables.dst[a] in tables.ent_aux[e0:min(e1, e0 + chunk)].tolist()


def test_segments_follow_a_stencil_row():
    """On a 2D grid in natural order the pieces of the solve run along grid rows, cut every S,
    and are ticketed by their level in the DAG of pieces — piece s of grid row r after r + s
    hops — not by the level of their first link (r + S·s)."""
    A = sm.poisson2d(12)
    mats = operands("sptrsv_spmv", A)
    s = fs.inspect("sptrsv_spmv", *mats, kind="wavefront")
    blk_ptr, blk_iter = t3_chains.segment_blocks(s, mats, t3.rows.row_tables("sptrsv_spmv", *mats), 4, 5)
    pieces = [blk_iter[blk_ptr[t]:blk_ptr[t + 1]] for t in range(len(blk_ptr) - 1)]
    pieces = [p for p in pieces if p[0] < 144 and len(p) > 1]          # in ticket order
    assert sorted(len(p) for p in pieces) == sorted([5, 5, 2] * 12)
    for p in pieces:
        assert (np.diff(p) == 1).all() and p[0] // 12 == p[-1] // 12
    hops = [p[0] // 12 + p[0] % 12 // 5 for p in pieces]                 # r + s
    assert hops == sorted(hops)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen=st.sampled_from(tuple(sm.GENERATORS)), size=st.integers(1, 150), seed=st.integers(0, 1000),
       pair=st.sampled_from(PAIRS), kind=st.sampled_from(fs.KINDS), workers=st.integers(1, 9),
       R=st.sampled_from([1, 2, 3, 16, 32]), tickets=st.sampled_from(t3.TICKETS),
       lonely=st.sampled_from([0.0, 0.1, 0.5]))
def test_ticket_order_never_waits_on_itself_or_the_future(gen, size, seed, pair, kind, workers, R, tickets,
                                                          lonely):
    """Every iteration in exactly one block of at most R; for every dependence u → v, u's block
    has a lower ticket than v's (so not the same block: its lanes run at once, and a program
    only ever waits for programs that already hold a ticket); v's block lists u's among the
    blocks it waits for, and lists nothing else. With `alone` (a random share `lonely` of the
    iterations) each of those is a block by itself. ticket_cut gives the same blocks, without
    the waits."""
    mats = operands(pair, matrix(gen, size, seed))
    s = fs.inspect(pair, *mats, kind=kind, workers=workers)
    n = s.n1 + s.n2
    alone = np.random.default_rng(seed).random(n) < lonely if lonely else None
    blk_ptr, seq, dep_ptr, dep_blk = t3.ticket_blocks(s, mats, R, tickets, alone=alone)
    same_ptr, same_seq = t3_tickets.ticket_cut(s, mats, R, tickets, alone=alone)
    assert np.array_equal(same_ptr, blk_ptr) and np.array_equal(same_seq, seq)
    assert sorted(seq.tolist()) == list(range(n))
    sizes = np.diff(blk_ptr)
    assert blk_ptr[0] == 0 and blk_ptr[-1] == n and sizes.min() >= 1 and sizes.max() <= R
    block_of = np.empty(n, dtype=np.int64)
    block_of[seq] = np.repeat(np.arange(len(sizes)), sizes)
    u, v = sd.joint_dag(pair, *mats).sources()
    assert (block_of[u] < block_of[v]).all()
    want = [set() for _ in sizes]
    for a, b in zip(block_of[u].tolist(), block_of[v].tolist()):
        want[b].add(a)
    got = [dep_blk[dep_ptr[t]:dep_ptr[t + 1]].tolist() for t in range(len(sizes))]
    assert [sorted(w) for w in want] == got
    if alone is not None:
        assert (sizes[block_of[alone]] == 1).all()
    elif tickets == "dag":     # blocks follow the joint DAG's wavefronts: no more of them than needed
        level = sd.wavefront_levels(sd.joint_dag(pair, *mats))
        assert len(sizes) == sum(-(-c // R) for c in np.bincount(level))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen=st.sampled_from(tuple(sm.GENERATORS)), size=st.integers(1, 120), seed=st.integers(0, 1000),
       pair=st.sampled_from(PAIRS))
def test_latest_levels(gen, size, seed, pair):
    """As-late-as-possible levels: every dependence rises by at least one, every sink sits on the
    last level, nothing lies below its as-soon-as-possible level, and an iteration with a
    successor sits exactly one level below the lowest of them."""
    mats = operands(pair, matrix(gen, size, seed))
    s = fs.inspect(pair, *mats, kind="wavefront")
    dag = sd.joint_dag(pair, *mats)
    asap, alap = sd.wavefront_levels(dag), t3_tickets._latest_levels(s, mats)
    u, v = dag.sources()
    assert (alap[u] < alap[v]).all() and (alap >= asap).all()
    lowest = np.full(dag.n, asap.max(initial=0) + 1)
    np.minimum.at(lowest, u, alap[v])
    np.testing.assert_array_equal(alap, lowest - 1)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen=st.sampled_from(tuple(sm.GENERATORS)), size=st.integers(1, 120), seed=st.integers(0, 1000),
       pair=st.sampled_from(PAIRS), heavy=st.sampled_from([2, 4, 6, 1 << 30]))
def test_mid_levels_start_heavy_rows_early(gen, size, seed, pair, heavy):
    """tickets="mid": every dependence rises; an iteration of more than HEAVY entries sits at
    twice its as-soon-as-possible level; any other sits at the sum of its two levels, or lower
    only as far as a successor pulls it (one below the lowest successor's key)."""
    mats = operands(pair, matrix(gen, size, seed))
    s = fs.inspect(pair, *mats, kind="wavefront")
    dag = sd.joint_dag(pair, *mats)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(t3_tickets, "HEAVY", heavy)
        asap, alap, key = sd.wavefront_levels(dag), t3_tickets._latest_levels(s, mats), t3_tickets._mid_levels(s, mats)
    u, v = dag.sources()
    assert (key[u] < key[v]).all() and (key >= 2 * asap).all()
    big = sd.joint_cost(pair, *mats) > heavy
    np.testing.assert_array_equal(key[big], 2 * asap[big])
    pull = np.full(dag.n, np.iinfo(np.int64).max)
    np.minimum.at(pull, u, key[v] - 1)
    np.testing.assert_array_equal(key[~big], np.minimum(asap + alap, pull)[~big])


def test_mid_tickets_pull_a_heavy_rows_inputs_early(monkeypatch):
    """spmv_sptrsv where solve row 20 reads y_20 and solve rows 0–9 (eleven entries: heavy, for a
    HEAVY of 8) and
    nothing reads it, beside a chain of 19 solve rows that sets the depth. Halfway keys would put
    its inputs after it (the SpMV rows halfway to level 18); _mid_levels starts row 20 at its
    earliest level and pulls its inputs before it."""
    import scipy.sparse as sparse

    monkeypatch.setattr(t3_tickets, "HEAVY", 8)
    n = 40
    low = sparse.lil_matrix((n, n))
    low.setdiag(2.0)
    low[20, :10] = 1.0
    for i in range(22, n):
        low[i, i - 1] = 1.0
    mats = (sparse.identity(n, format="csr"), low.tocsr())
    s = fs.inspect("spmv_sptrsv", *mats, kind="wavefront")
    dag = sd.joint_dag("spmv_sptrsv", *mats)
    asap, alap = sd.wavefront_levels(dag), t3_tickets._latest_levels(s, mats)
    row20 = n + 20
    assert asap[row20] == 2 and alap[n + 20] == alap.max() and asap[20] + alap[20] > 2 * asap[row20]
    key = t3_tickets._mid_levels(s, mats)
    u, v = dag.sources()
    assert (key[u] < key[v]).all()
    assert key[row20] == 4 and key[20] == 3 and (key[n:n + 10] == 3).all() and (key[:10] == 2).all()


def test_default_ticket_order_by_executor():
    """tickets=None takes TICKET_ORDER of the executor: "mid" for dataflow, "dag" for the flag
    executor; a factor pair, which runs on the flag executor's kernel whichever executor is
    named, takes FACTOR_TICKETS ("alap")."""
    mats = operands("sptrsv_spmv", sm.poisson2d(6))
    x = torch.ones(mats[0].shape[0], dtype=torch.float64, device=DEVICE)
    assert t3.prepare("sptrsv_spmv", *mats, like=x, executor="dataflow").tickets == "mid"
    assert t3.prepare("sptrsv_spmv", *mats, like=x, executor="syncfree").tickets == "dag"
    assert t3.tuning_defaults("dataflow")["tickets"] == "mid"
    A = sm.poisson2d(6)
    for executor in ("dataflow", "syncfree"):
        assert t3.prepare("spilu0_sptrsv", A, like=x, executor=executor).tickets == "alap"
        assert t3.prepare("spic0_sptrsv", A, like=x, executor=executor, tickets="dag").tickets == "dag"
    assert t3.tuning_defaults("dataflow", "spic0_sptrsv")["tickets"] == "alap"
    assert t3.tuning_defaults("syncfree", "sptrsv_sptrsv")["tickets"] == "dag"


def test_alap_tickets_put_spmv_rows_just_before_their_readers():
    """spmv_sptrsv on a 2D grid: by as-soon-as-possible level every SpMV row is in the first
    group, ahead of the whole solve; by as-late-as-possible level, SpMV row i comes one level
    before solve row i, which reads it."""
    mats = operands("spmv_sptrsv", sm.poisson2d(8))
    s = fs.inspect("spmv_sptrsv", *mats, kind="wavefront")
    alap = t3_tickets._latest_levels(s, mats)
    n = mats[0].shape[0]
    assert (sd.wavefront_levels(sd.joint_dag("spmv_sptrsv", *mats))[:n] == 0).all()
    np.testing.assert_array_equal(alap[:n], alap[n:] - 1)


def test_dag_tickets_keep_the_schedules_order_inside_a_level():
    """Ties within a wavefront level are broken by the schedule's order, so a block holds
    iterations the schedule put together (here: a partition of the sparse-fusion schedule)."""
    mats = operands("sptrsv_spmv", sm.poisson2d(12))
    s = fs.inspect("sptrsv_spmv", *mats, kind="sparse_fusion", workers=2)
    _, seq, _, _ = t3.ticket_blocks(s, mats, 8, "dag")
    level = sd.wavefront_levels(sd.joint_dag("sptrsv_spmv", *mats))
    pos = np.empty(len(seq), dtype=np.int64)
    pos[s.order] = np.arange(len(seq))
    assert (np.diff(level[seq]) >= 0).all()
    same = np.diff(level[seq]) == 0
    assert (np.diff(pos[seq])[same] > 0).all()
    with pytest.raises(ValueError, match="ties must be one of"):
        t3_tickets.ticket_order(s, mats, "dag", ties="rows")


@pytest.mark.parametrize("pair", ["sptrsv_spmv", "sptrsv_sptrsv"])
def test_dataflow_records_take_a_levels_rows_in_order(pair):
    """With ties="ids" a level's iterations go in id order whatever the schedule, so the "dag"
    blocks are the same under every schedule — and so are the dataflow executor's records, which
    take them (_dataflow_plan; the schedule's own order made the sparse-fusion schedule slower
    than wavefront on the grids: ticket_order)."""
    mats = [sd.csr(M) for M in operands(pair, sm.poisson2d(12))]
    level = sd.wavefront_levels(sd.joint_dag(pair, *mats))
    tables = rows.row_tables(pair, *mats)
    blocks, plans = {}, {}
    for kind in fs.KINDS:
        s = fs.inspect(pair, *mats, kind=kind, workers=2)
        blocks[kind] = t3.ticket_blocks(s, mats, 8, "dag", ties="ids")
        seq = blocks[kind][1]
        assert (np.diff(level[seq]) >= 0).all()
        assert (np.diff(seq)[np.diff(level[seq]) == 0] > 0).all()
        plans[kind] = t3._dataflow_plan(s, mats, tables, 4, "dag", torch.device("cpu"))
    for kind in fs.KINDS:
        for a, b in zip(blocks[kind], blocks["wavefront"]):
            np.testing.assert_array_equal(a, b)
        _assert_same_plan(plans[kind], plans["wavefront"], kind)


def _assert_same_plan(plan, ref, why):
    """Two plans (block count, block tables on the device, …) with the same blocks and tables."""
    assert plan[0] == ref[0] and plan[1].keys() == ref[1].keys(), why
    for key, t in plan[1].items():
        assert torch.equal(t, ref[1][key]), (why, key)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen=st.sampled_from(tuple(sm.GENERATORS)), size=st.integers(2, 120), seed=st.integers(0, 1000),
       pair=st.sampled_from(sd.FACTOR_PAIRS), workers=st.integers(1, 6), R=st.sampled_from([1, 4, 8]))
def test_factor_plans_take_a_levels_rows_in_order(gen, size, seed, pair, workers, R):
    """The flag executor's plan cuts each ticket group in id order (PLAN_TIES): with rows apart,
    every schedule gives the wavefront schedule's very blocks; with the rows a schedule fuses
    merged, the blocks still take each level's rows in order. Without waits (the values as
    flags) a plan holds the same tables but the blocks' waits."""
    mats = [sd.csr(M) for M in operands(pair, matrix(gen, size, seed))]
    tables = rows.row_tables(pair, *mats)
    cpu = torch.device("cpu")
    schedules = {kind: fs.inspect(pair, *mats, kind=kind, workers=workers) for kind in fs.KINDS}
    plans = {kind: t3._syncfree_plan(s, mats, tables, R, "dag", False, cpu) for kind, s in schedules.items()}
    for kind in fs.KINDS:
        _assert_same_plan(plans[kind], plans["wavefront"], kind)
    for s in schedules.values():
        seq = t3._syncfree_plan(s, mats, tables, R, "dag", True, cpu)[1]["blk_iter"].long().numpy()
        level = t3_tickets._ticket_graph(s, mats, True)[1]
        assert (np.diff(level[seq]) >= 0).all() and (np.diff(seq)[np.diff(level[seq]) == 0] > 0).all()
        for fuse in (False, True):
            waits, none = (t3._syncfree_plan(s, mats, tables, R, "dag", fuse, cpu, waits=w) for w in (True, False))
            unread = ("dep_ptr", "dep_blk")
            _assert_same_plan((none[0], {k: t for k, t in none[1].items() if k not in unread}, *none[2:]),
                              (waits[0], {k: t for k, t in waits[1].items() if k not in unread}, *waits[2:]), fuse)
            assert none[2:] == waits[2:] and not none[1]["dep_ptr"].any()


# ---------------------------------------------------------------- launches

class _Counted:
    """Stands in for a @triton.jit kernel: counts launches, then launches. Anything else (a
    striding launch's `warmup` on a GPU) goes to the kernel."""

    def __init__(self, kernel):
        self.kernel, self.launches = kernel, 0

    def __getattr__(self, name):
        return getattr(self.kernel, name)

    def __getitem__(self, grid):
        self.launches += 1
        return self.kernel[grid]


@pytest.mark.parametrize("pair", PAIRS)
def test_launch_counts(pair, monkeypatch):
    """t2: one launch per wavefront level of each kernel's own DAG (SpMV: one). t3 levels: one
    per level of the schedule. t3 sync-free (flags or dataflow): one, whatever the schedule."""
    mats, b = _problem(pair, seed=1)
    x = _vector(b, "float32")
    rows2, level3, free3, flow3 = (_Counted(k) for k in (t2._rows, t3_levels._level, t3._syncfree, t3._dataflow))
    monkeypatch.setattr(t2, "_rows", rows2)
    monkeypatch.setattr(t3_levels, "_level", level3)
    monkeypatch.setattr(t3, "_syncfree", free3)
    monkeypatch.setattr(t3, "_dataflow", flow3)
    g1, g2, _ = sd.kernel_dags(pair, *mats)
    depth = [int(sd.wavefront_levels(g).max()) + 1 for g in (g1, g2)]
    if pair.startswith("spmv"):
        assert depth[0] == 1
    if pair.endswith("spmv"):
        assert depth[1] == 1
    getattr(t2, pair)(*mats, x)
    assert rows2.launches == sum(depth)
    for kind in ("wavefront", "sparse_fusion"):
        s = _schedule(pair, mats, kind, seed=1)
        level3.launches = free3.launches = flow3.launches = 0
        t3.prepare(pair, *mats, like=x, schedule=s, executor="levels")(x)
        assert (level3.launches, free3.launches) == (int((np.diff(s.level_ptr) > 0).sum()), 0)
        t3.prepare(pair, *mats, like=x, schedule=s, executor="syncfree")(x)
        assert free3.launches == 1 and level3.launches == int((np.diff(s.level_ptr) > 0).sum())
        t3.prepare(pair, *mats, like=x, schedule=s, executor="dataflow")(x)
        # a factor pair's dataflow executor is the flag executor's kernel, its values as flags
        assert (flow3.launches, free3.launches) == ((0, 2) if pair in sd.FACTOR_PAIRS else (1, 1))


# ---------------------------------------------------------------- inspector–executor: prepared once, run many times

def test_prepared_runs_new_vectors_and_reuses_its_tables():
    pair = "spilu0_sptrsv"
    mats, _ = _problem(pair, seed=2)
    s = fs.inspect(pair, *mats, workers=3)
    rng = np.random.default_rng(_seed("prepared"))
    like = _vector(rng.standard_normal(mats[0].shape[0]), "float64")
    runs = {"t2": t2.prepare(pair, *mats, like=like, schedule=s),
            "levels": t3.prepare(pair, *mats, like=like, schedule=s, executor="levels"),
            "syncfree": t3.prepare(pair, *mats, like=like, schedule=s, executor="syncfree")}
    for i in range(2):
        b = rng.standard_normal(mats[0].shape[0])
        ref = registry.get("sparse_fusion", "t0_numpy", pair)(*mats, b)
        for name, run in runs.items():
            _check(run(_vector(b, "float64")), ref, pair, mats, "float64", f"{name} call {i}")
    # the schedule carries what t3 derived from it; the pattern's tables are shared by both tiers
    assert any(k[0] == "t3_levels" for k in s.cache if isinstance(k, tuple))
    assert any(k[0] == "t3_syncfree" for k in s.cache if isinstance(k, tuple))
    assert runs["t2"].tables is runs["levels"].tables is runs["syncfree"].tables
    cached = dict(s.cache)
    t3.prepare(pair, *mats, like=like, schedule=s, executor="syncfree")(like)
    assert all(s.cache[k] is v for k, v in cached.items()) and len(s.cache) == len(cached)


@pytest.mark.parametrize("pair", ["spic0_sptrsv", "sptrsv_spmv"])
def test_prepared_runners_outlive_the_caches(pair):
    """The benchmark drops the pattern caches and each schedule's derived plans before every
    prepare, so that each row's setup counts them (bench.runner): a runner prepared earlier must
    keep running on what it holds, and the schedule keeps what its inspector left."""
    mats, b = _problem(pair, seed=4)
    s = fs.inspect(pair, *mats)
    assert set(s.cache) == {fs.JOINT_DAG, fs.JOINT_LEVELS}
    like = _vector(b, "float64")
    runs = [t3.prepare(pair, *mats, like=like, schedule=s, executor=ex) for ex in t3.executors_for(pair)[:2]]
    runs.append(t2.prepare(pair, *mats, like=like))
    rows.forget_patterns()
    s.forget()
    assert set(s.cache) == {fs.JOINT_DAG, fs.JOINT_LEVELS}
    ref = registry.get("sparse_fusion", "t0_numpy", pair)(*mats, b)
    for run in runs:
        _check(run(like), ref, pair, mats, "float64", "after the caches were dropped")
    assert rows._PATTERNS == {}          # no call looked the pattern up again


def test_the_prepared_vector_must_fit():
    mats, b = _problem("sptrsv_spmv")
    run = t3.prepare("sptrsv_spmv", *mats, like=_vector(b, "float64"))
    with pytest.raises(ValueError, match=r"the vector must have shape \(36,\), got \(35,\)"):
        run(_vector(b[:-1], "float64"))
    with pytest.raises(ValueError, match="the vector is torch.float32 on .+, but this runner was prepared for "
                                         "torch.float64"):
        run(_vector(b, "float32"))
    with pytest.raises(ValueError, match="the vector must be a torch.Tensor like the one this runner was prepared "
                                         "for, got ndarray"):
        run(b)


@pytest.mark.parametrize("pair", PAIRS)
def test_prepared_calls_take_a_non_finite_vector_as_ieee_does(pair, monkeypatch):
    """The pair functions refuse a non-finite vector; a prepared call does not look at the values
    (a synchronisation a call). Such a call must still end (a NaN no arithmetic makes is the
    values-as-flags executors' sentinel, so a computed NaN is not mistaken for one), give NaN
    where the input's NaN reaches and only there (where t0's loops, given the same vector, give
    NaN; its validation is shown a finite copy), and leave the runner right for the next call."""
    mats, b = _problem(pair, seed=5)
    like = _vector(b, "float64")
    bad = like.clone()
    bad[len(b) // 2] = float("nan")
    with pytest.raises(ValueError, match="has non-finite values"):
        registry.get("sparse_fusion", "t3_triton_fused", pair)(*mats, bad)
    t0 = registry.get("sparse_fusion", "t0_numpy", pair)
    ref = t0(*mats, b)
    check = t0_sparse_fusion.validate_sparse_fusion
    monkeypatch.setattr(t0_sparse_fusion, "validate_sparse_fusion",
                        lambda pair, mats, vector, *rest, **kw: check(pair, mats, np.nan_to_num(vector), *rest, **kw))
    reach = [np.isnan(o) for o in t0(*mats, bad.cpu().numpy()) if isinstance(o, np.ndarray)]
    assert reach[0].any() and not reach[0].all(), "the NaN must reach some of the first output, not all"
    runs = [t3.prepare(pair, *mats, like=like, executor=ex) for ex in t3.executors_for(pair)]
    for run in runs + [t2.prepare(pair, *mats, like=like)]:
        name = getattr(run, "executor", "t2")
        for call in range(2):           # on a GPU the second runs a factor pair's graph
            out = [o for o in run(bad) if o.layout == torch.strided]
            for o, want in zip(out, reach, strict=True):
                np.testing.assert_array_equal(torch.isnan(o).cpu().numpy(), want, err_msg=f"{name}, call {call}")
            _check(run(like), ref, pair, mats, "float64", f"after NaN call {call} ({name})")


# ---------------------------------------------------------------- options

def test_executor_options():
    mats, b = _problem("sptrsv_spmv")
    x = _vector(b, "float64")
    with pytest.raises(ValueError, match="executor must be one of levels, syncfree, dataflow, chains, segments, "
                                         "bands or None, got 'fast'"):
        t3.prepare("sptrsv_spmv", *mats, like=x, executor="fast")
    A = sm.poisson2d(4)
    with pytest.raises(ValueError, match="executor 'chains' carries vector entries from row to row, but "
                                         "spilu0_sptrsv computes a factor in place .+ use one of levels, syncfree, "
                                         "dataflow$"):
        t3.prepare("spilu0_sptrsv", A, like=_vector(np.ones(16), "float64"), executor="chains")
    with pytest.raises(ValueError, match="tickets must be one of dag, alap, mid, schedule or None, got 'random'"):
        t3.prepare("sptrsv_spmv", *mats, like=x, tickets="random")
    with pytest.raises(ValueError, match="block_rows must be a power of two from 1 to 128, got 24"):
        t3.prepare("sptrsv_spmv", *mats, like=x, block_rows=24)
    with pytest.raises(ValueError, match="num_warps must be 1, 2, 4 or 8, got 3"):
        t3.prepare("sptrsv_spmv", *mats, like=x, num_warps=3)
    with pytest.raises(ValueError, match="nap_ns must be an int from 0 to 10000, got -5"):
        t3.prepare("sptrsv_spmv", *mats, like=x, nap_ns=-5)
    with pytest.raises(ValueError, match="programs_per_sm must be an int from 0 to 64, got 65"):
        t3.prepare("sptrsv_spmv", *mats, like=x, programs_per_sm=65)
    with pytest.raises(ValueError, match="tickets_ahead must be 0, 1 or 2, got 3"):
        t3.prepare("sptrsv_spmv", *mats, like=x, executor="dataflow", tickets_ahead=3)
    with pytest.raises(ValueError, match="tickets_ahead must be 0, 1 or 2, got True"):
        t3.prepare("sptrsv_spmv", *mats, like=x, executor="dataflow", tickets_ahead=True)
    with pytest.raises(ValueError, match="chain_steps must be an int from 1 to 4096, got 0"):
        t3.prepare("sptrsv_spmv", *mats, like=x, chain_steps=0)
    with pytest.raises(ValueError, match="chain_steps of the segments executor must be at most 128 .+, got 129"):
        t3.prepare("sptrsv_spmv", *mats, like=x, executor="segments", chain_steps=129)
    with pytest.raises(ValueError, match="executor 'segments' carries vector entries from row to row, but "
                                         "spilu0_sptrsv"):
        t3.prepare("spilu0_sptrsv", A, like=_vector(np.ones(16), "float64"), executor="segments")
    with pytest.raises(ValueError, match="executor 'chains' carries vector entries from row to row, but "
                                         "spic0_sptrsv"):
        t3.prepare("spic0_sptrsv", sm.poisson2d(4), like=_vector(np.ones(16), "float64"), executor="chains")
    with pytest.raises(TypeError):
        t3.sptrsv_spmv(*mats, x, executor="levels")   # same signature in every tier: choose through prepare
    s = _schedule("sptrsv_spmv", mats, "wavefront")
    assert t3.executor_rule(torch.device("cpu"), s) == "levels"
    assert t3.executor_rule(torch.device("cuda"), s) in t3.EXECUTORS


def test_factor_executor_rule():
    """On a GPU a factor pair runs on the dataflow executor (values as flags) unless its held rows'
    step work passes DATA_HELD_WORK (a wide band's, not the 27-point stencil's): then on the flag
    executor; and the dataflow executor on a factor pair takes the flag executor's options
    (kernel_of)."""
    cuda = torch.device("cuda")
    for A, pair, expect in ((sm.poisson2d(6), "spilu0_sptrsv", "dataflow"),
                            (sm.poisson3d(6, points=27), "spilu0_sptrsv", "dataflow"),
                            (sm.banded_spd(60, 16), "spic0_sptrsv", "syncfree")):
        tables = rows.row_tables(pair, A)
        heavy = int(np.prod(tables.held_shape)) > t3.DATA_HELD_WORK
        assert tables.held_shape[0] and heavy == (expect == "syncfree")
        s = _schedule(pair, (A,), "wavefront")
        assert t3.executor_rule(cuda, s, tables) == expect
    assert t3.kernel_of("dataflow", "spic0_sptrsv") == "syncfree" == t3.kernel_of("syncfree", "sptrsv_spmv")
    assert t3.kernel_of("dataflow", "sptrsv_spmv") == "dataflow"
    data, flags = (t3.tuning_defaults(ex, "spilu0_sptrsv") for ex in ("dataflow", "syncfree"))
    assert data == {**flags, "fuse_rows": None} and flags["fuse_rows"] is t3.FUSE_ROWS    # None: fuses_rows
    assert "fuse_rows" in t3.tunable("dataflow", "spilu0_sptrsv") and "fuse_rows" not in t3.tunable("dataflow")
    b = np.random.default_rng(2).standard_normal(36)
    run = t3.prepare("spilu0_sptrsv", sm.poisson2d(6), like=_vector(b, "float64"), executor="dataflow",
                     lean=False)         # else the lean rows (runs_lean)
    assert run.data and run.programs_per_sm == t3.FLAG_PROGRAMS_PER_SM and run.claim == "counter"
    assert run.fuse_rows is t3.FUSE_ROWS and not run.tables.walks


def test_factor_executor_rule_when_every_row_walks():
    """Past HELD_WORK every factor row walks (held_shape (0, 0, 0)): executor=None takes the
    dataflow executor there (measured 5–8× faster than flags on such rows), however heavy the
    rows' shape."""
    A = sm.banded_spd(60, 20)
    tables = rows.row_tables("spic0_sptrsv", A)
    assert tables.held_shape == (0, 0, 0) and int(np.prod(tables.hold_shape)) > rows.HELD_WORK > t3.DATA_HELD_WORK
    assert t3.executor_rule(torch.device("cuda"), _schedule("spic0_sptrsv", (A,), "wavefront"), tables) == "dataflow"


def test_dataflow_fuses_rows_unless_rows_walk(monkeypatch):
    """fuse_rows=None: the dataflow executor fuses a factor pair's solve rows as the flag executor
    does (FUSE_ROWS), except where some factor rows walk in memory (fuses_rows); given, it is
    taken as it is."""
    monkeypatch.setattr(rows, "HOLD_SHARE", 0.6)
    monkeypatch.setattr(rows, "_PATTERNS", {})
    pair = "spilu0_sptrsv"
    A = matrix("powerlaw_laplacian", 60, 5)
    b = _vector(np.random.default_rng(4).standard_normal(A.shape[0]), "float64")
    s = fs.inspect(pair, A, kind="sparse_fusion")
    assert rows.row_tables(pair, A).walks
    assert t3.fuses_rows("dataflow", pair, rows.row_tables(pair, A)) is False
    assert t3.prepare(pair, A, like=b, schedule=s, executor="dataflow").fused == 0
    assert t3.prepare(pair, A, like=b, schedule=s, executor="dataflow", fuse_rows=True).fused > 0
    assert t3.prepare(pair, A, like=b, schedule=s, executor="syncfree").fused > 0
    assert t3.fuses_rows("dataflow", "sptrsv_spmv", rows.row_tables(pair, A)) is t3.FUSE_ROWS


@pytest.mark.parametrize("chunk", [sd.PIECE, 5])
def test_rewritten_entries(chunk, monkeypatch):
    """The factor entries the dataflow executor holds at the sentinel until their row is done are
    exactly those a step rewrites: every other entry of t0's factor is A's value, every step's own
    entry is among them, and the buffers of a call put the sentinel there and nowhere else; the
    same with the pairs taken 5 at a time."""
    monkeypatch.setattr(sd, "PIECE", chunk)
    for pair, A in (("spilu0_sptrsv", matrix("powerlaw_laplacian", 40, 2)), ("spic0_sptrsv", matrix("poisson3d_27", 4, 2))):
        t = rows.row_tables(pair, A)
        at = t.rewritten
        assert (np.diff(at) > 0).all()
        assert np.isin(t.ent_val[:t.ent_ptr[t.n1]], at).all()
        first = values_of(A if pair == "spilu0_sptrsv" else sp.tril(A, format="csr"))
        b = np.random.default_rng(3).standard_normal(A.shape[0])
        factor = values_of(_reference(pair, (A,), b, "float64", ("rewritten", pair))[0])
        keep = np.setdiff1d(np.arange(len(first)), at)
        assert np.array_equal(factor[keep], first[keep]) and not np.array_equal(factor[at], first[at])
        run = t3.prepare(pair, A, like=_vector(b, "float64"), executor="dataflow")
        val, own, vec = t3._data_buffers(run, _vector(b, "float64"))
        assert torch.equal(vec[:A.shape[0]].cpu(), _vector(b, "float64").cpu())
        sent = val.cpu().view(torch.int64).numpy() == t3.SENTINEL[torch.float64]
        assert np.array_equal(np.flatnonzero(sent), at) and torch.equal(own.cpu(), run.values.cpu())
        assert (vec[A.shape[0]:].cpu().view(torch.int64) == t3.SENTINEL[torch.float64]).all()


@pytest.mark.parametrize("pair", ["spilu0_sptrsv", "spic0_sptrsv"])
@pytest.mark.parametrize("gen, apart", [("poisson2d", True), ("poisson3d", True), ("poisson3d_27", False),
                                        ("powerlaw_laplacian", False)])
@pytest.mark.parametrize("chunk", [sd.PIECE, 7])
def test_steps_apart(gen, apart, pair, chunk, monkeypatch):
    """RowTables.steps_apart against what it means: where a row's steps are apart, no step reads
    what another step of the row wrote, so t0's factor holds every entry below the diagonal as
    A's value over its pivot (ILU(0): l_ik·u_kk = a_ik; IC(0): l_ij·l_jj = a_ij); where they chain
    (27-point stencil, a graph with triangles) some entry does not. The same with the pairs taken
    7 at a time."""
    monkeypatch.setattr(sd, "PIECE", chunk)
    A = matrix(gen, 64, 2)
    t = rows.row_tables(pair, A)
    assert t.steps_apart == apart
    b = np.random.default_rng(5).standard_normal(A.shape[0])
    F = _reference(pair, (A,), b, "float64", ("apart", gen, pair))[0]
    F = sp.csr_matrix(F)
    i, j = F.nonzero()
    low = i > j
    diag = F.diagonal()
    ratio_holds = np.isclose(np.asarray(F[i[low], j[low]]).ravel() * diag[j[low]],
                             np.asarray(A[i[low], j[low]]).ravel(), rtol=1e-12, atol=0)
    assert ratio_holds.all() == apart


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("executor", ["syncfree", "dataflow"])
@pytest.mark.parametrize("gen", ["poisson2d", "poisson3d"])
def test_ic0_steps_in_one_pass_match_t0(gen, executor, dtype):
    """IC(0) on the 5- and 7-point grids, whose held rows take their steps in one pass
    (held_in_one_pass), on both executors that hold rows, under a schedule that fuses the solve
    rows and one that cannot."""
    pair = "spic0_sptrsv"
    mats = operands(pair, matrix(gen, 64, 4))
    b = np.random.default_rng(_seed("one pass", gen)).standard_normal(mats[0].shape[0])
    tables = rows.row_tables(pair, *mats)
    assert t3.held_in_one_pass(tables, tables.held_shape[0])
    for kind in ("wavefront", "sparse_fusion"):
        s = fs.inspect(pair, *mats, kind=kind, workers=2)
        run = t3.prepare(pair, *mats, like=_vector(b, dtype), schedule=s, executor=executor)
        _check(run(_vector(b, dtype)), _reference(pair, mats, b, dtype, ("one pass", gen, dtype)), pair, mats, dtype,
               f"t3 {executor} {gen} {kind}")


def test_held_in_one_pass_rule():
    """Only IC(0) rows whose steps are apart take them in one pass (ILU(0)'s pass measured slower),
    and only where rows are held."""
    for A, pair, expect in ((sm.poisson2d(6), "spic0_sptrsv", True), (sm.poisson3d(4), "spic0_sptrsv", True),
                            (sm.poisson2d(6), "spilu0_sptrsv", False),
                            (sm.poisson3d(4, points=27), "spic0_sptrsv", False)):
        t = rows.row_tables(pair, A)
        assert t3.held_in_one_pass(t, t.held_shape[0]) == expect
        assert not t3.held_in_one_pass(t, 0)
    assert not rows.row_tables("sptrsv_spmv", sp.tril(sm.poisson2d(6), format="csr"), sm.poisson2d(6)).steps_apart


def test_t2_checks_the_schedule_it_does_not_follow():
    mats, b = _problem("sptrsv_spmv")
    with pytest.raises(ValueError, match="schedule was inspected for the pair 'spmv_sptrsv'"):
        t2.sptrsv_spmv(*mats, _vector(b, "float32"), schedule=fs.inspect("spmv_sptrsv", mats[1], mats[0]))


# ---------------------------------------------------------------- held factor rows (sparse_rows.held_fetch)

def _arrow_last(n):
    """SPD with its last row and column full: an ILU(0) whose one factor row steps through every
    column and pairs each step with its diagonal, entry n − 1 of the row (bit 31 of a step's bits
    at n = 32)."""
    A = np.eye(n) * (2.0 * n)
    A[-1, :] = A[:, -1] = 1.0
    A[-1, -1] = 2.0 * n
    return sp.csr_matrix(A)


def _arrow_first(n):
    """_arrow_last turned around: row 0 and column 0 full."""
    return sp.csr_matrix(_arrow_last(n).toarray()[::-1, ::-1])


def test_held_shape_and_budget():
    """(W, S, C) covers the held rows' most entries held, most steps and most pairs of a step, as
    powers of two; past HELD_BUDGET prefetched operand positions (lanes · S · C as a list, lanes ·
    S · W as a grid: GRID_WORK) rows walk instead. An ILU(0) row holds its entries
    up to the last one its steps touch, not its whole row: a full first row costs nothing, while
    a row that would hold more than HELD_WIDTH entries walks on its own."""
    tables = rows.row_tables("spilu0_sptrsv", sm.poisson2d(6))
    assert tables.held_shape == (4, 2, 2) and not tables.walks    # west, south and the diagonal of 5 entries
    t27 = rows.row_tables("spilu0_sptrsv", sm.poisson3d(3, points=27))
    W, S, C = t27.held_shape
    assert (W, S) == (32, 16) and W >= 27 and S >= 13
    assert S * C * W > rows.GRID_WORK and t27.held_pairs == S * W                # a grid
    assert t27.held(rows.HELD_BUDGET // (S * W)) == (W, S, C)
    assert t27.held(2 * rows.HELD_BUDGET // (S * W)) == (0, 0, 0)
    assert tables.held_pairs == 2 * 4 and tables.held(rows.HELD_BUDGET // 8) != (0, 0, 0)   # a grid
    assert rows.row_tables("sptrsv_spmv", *operands("sptrsv_spmv", sm.poisson2d(4))).held(1) == (0, 0, 0)
    n = rows.HELD_WIDTH + 8                            # an arrow wider than HELD_WIDTH
    L = _arrow_last(n)
    A = _arrow_first(n)                                # row 0 and column 0 full
    arrow = rows.row_tables("spilu0_sptrsv", A)
    assert arrow.held_shape == (2, 2, 2) and not arrow.walks       # row i touches l_i0 and u_ii only
    assert arrow.held_pairs == 2 * 2                               # a list: S · C · W within GRID_WORK
    assert rows.row_tables("spic0_sptrsv", A).held_shape == (2, 2, 2)   # tril rows are ≤ 2 wide
    last = rows.row_tables("spilu0_sptrsv", L)                     # the last row full instead
    assert last.walks and last.hold_len[-1] == 0 and (last.hold_len[:-1] == 0).all()   # its span is n


def _wide_row():
    """SPD of 64 rows whose row 15 is full and rows 0..14 also hold columns 15 and 63: ILU(0) row
    15 takes 15 steps over 64 entries, each pairing entry 63 (bit 63 of an int64), in a shape
    (64, 16, 2) whose grid a program may still prefetch (HELD_BUDGET)."""
    n = 64
    A = np.eye(n) * (4.0 * n)
    A[15, :] = A[:, 15] = 1.0
    A[:15, 63] = A[63, :15] = 1.0
    A[15, 15] = A[63, 63] = 4.0 * n
    return sp.csr_matrix(A)


def _hubs(n=100, hubs=40, degree=12, seed=0):
    """SPD whose rows past `hubs` each neighbour `degree` of the first `hubs` rows and nothing
    else: no triangles, so an IC(0) row's steps are apart (steps_apart), and its diagonal step
    pairs `degree` entries: a grid (GRID_WORK) taken in one pass."""
    rng = np.random.default_rng(seed)
    A = np.zeros((n, n))
    for i in range(hubs, n):
        A[i, rng.choice(hubs, degree, replace=False)] = -rng.uniform(0.5, 1.5, degree)
    A = A + A.T
    A[np.diag_indices(n)] = np.abs(A).sum(1) + 1.0
    return sp.csr_matrix(A)


HELD_LAYOUTS = [            # (matrix, pair, pairs as a grid, dtype): both layouts, either side of GRID_WORK
    ("arrow", "spilu0_sptrsv", False, "float64"), ("arrow", "spic0_sptrsv", False, "float32"),
    ("banded4", "spilu0_sptrsv", True, "float64"), ("banded4", "spic0_sptrsv", True, "float32"),
    ("banded10", "spilu0_sptrsv", True, "float32"), ("banded10", "spic0_sptrsv", True, "float64"),
    ("arrow32", "spilu0_sptrsv", True, "float64"), ("wide64", "spilu0_sptrsv", True, "float32"),
    ("hubs", "spic0_sptrsv", True, "float64"), ("hubs", "spilu0_sptrsv", True, "float32")]
# the executors that hold rows, each with a schedule: the level executor, the flag executor with
# fused rows, the dataflow executor with and without them
_HOLDING = (("levels", "wavefront"), ("syncfree", "sparse_fusion"), ("dataflow", "wavefront"),
            ("dataflow", "sparse_fusion"))
_LAYOUT_MATRICES = {"arrow": lambda: _arrow_first(24), "banded4": lambda: sm.banded_spd(30, 4, seed=3),
                    "banded10": lambda: sm.banded_spd(30, 10, seed=3),
                    "arrow32": lambda: _arrow_last(32), "wide64": _wide_row, "hubs": _hubs,
                    "arrow100": lambda: _arrow_last(100)}


@pytest.mark.parametrize("name,pair,grid,dtype", HELD_LAYOUTS)
def test_held_pairs_as_grid_or_list_match_t0(name, pair, grid, dtype):
    """Held rows take their pairs as a list or, past GRID_WORK, as a grid of operands gathered by
    the steps' bits (held_fetch); both match t0 in t2 and in every t3 executor that holds rows,
    with the bits' top positions used (arrow32: bit 31 of an int32, wide64: bit 63 of an int64),
    and the grid taken in one pass where IC(0)'s steps are apart (hubs)."""
    mats = operands(pair, _LAYOUT_MATRICES[name]())
    tables = rows.row_tables(pair, *mats)
    W, S, C = tables.held_shape
    assert W and (S * C * W > rows.GRID_WORK) == grid and tables.held_pairs == (S * W if grid else S * C)
    assert name != "wide64" or (W, S, C) == (64, 16, 2)
    if name == "hubs" and pair == "spic0_sptrsv":
        assert t3.held_in_one_pass(tables, W)
    b = np.random.default_rng(_seed("layouts", name, pair)).standard_normal(mats[0].shape[0])
    ref = _reference(pair, mats, b, dtype, ("layouts", name, pair, dtype))
    _check(getattr(t2, pair)(*mats, _vector(b, dtype)), ref, pair, mats, dtype, f"t2 {name}")
    assert {ex for ex, _ in _HOLDING} == set(t3.executors_for(pair))
    schedules = {kind: fs.inspect(pair, *mats, kind=kind, workers=2) for kind in ("wavefront", "sparse_fusion")}
    for executor, kind in _HOLDING:
        run = t3.prepare(pair, *mats, like=_vector(b, dtype), schedule=schedules[kind], executor=executor)
        assert run.tables.held(run.block_rows)[0] == W
        _check(run(_vector(b, dtype)), ref, pair, mats, dtype, f"t3 {executor} {name} {kind}")


@pytest.mark.parametrize("name,pair", [("poisson2d", "spilu0_sptrsv"), ("poisson3d_27", "spilu0_sptrsv"),
                                       ("poisson3d_27", "spic0_sptrsv"), ("powerlaw_laplacian", "spilu0_sptrsv"),
                                       ("wide64", "spilu0_sptrsv"), ("hubs", "spic0_sptrsv"),
                                       ("arrow100", "spilu0_sptrsv"), ("arrow100", "spic0_sptrsv")])
@pytest.mark.parametrize("chunk", [sd.PIECE, 3])
def test_step_bits_mark_each_steps_pairs(name, pair, chunk, monkeypatch):
    """Bit j of a step's bits is set exactly where one of its pairs pairs with entry j of the row
    (below 64), the pairs listed in the order of their entries (held_fetch counts bits to find
    them; a list out of that order is refused: test_step_bits_refuse_pairs_out_of_order). The
    tables carry them where the held rows take a grid, and one unread 0 where they take a list.
    With pieces of about 3 pairs, whole steps each, many steps are longer than a piece; arrow100's
    last row pairs with entries past the 64th, which set no bit."""
    monkeypatch.setattr(sd, "PIECE", chunk)
    A = _LAYOUT_MATRICES[name]() if name in _LAYOUT_MATRICES else matrix(name, 30, 1)
    t = rows.row_tables(pair, *operands(pair, A))
    bits = rows.step_bits(t.n1, t.ent_ptr, t.ent_val, t.upd_ptr, t.upd_a, t.fac_ptr)
    rows_of = sd.row_ids(t.ent_ptr[:t.n1 + 1].astype(np.int64))
    far = False
    for e in range(int(t.ent_ptr[t.n1])):
        p = int(t.ent_val[e])
        local = t.upd_a[t.upd_ptr[p]:t.upd_ptr[p + 1]].astype(np.int64) - int(t.fac_ptr[rows_of[e]])
        assert (np.diff(local) > 0).all()
        want = 0
        for j in local[local < 64]:
            want |= 1 << int(j)
        assert int(np.uint64(bits[e].astype(np.uint64))) == want, (e, local)
        far |= bool((local >= 64).any())
    assert far == (name == "arrow100")
    grid = t.held_shape[0] and rows.grid_layout(t.held_shape)
    assert np.array_equal(t.step_bits, bits) if grid else np.array_equal(t.step_bits, [0])


@pytest.mark.parametrize("chunk", [sd.PIECE, 1, 2])
def test_step_bits_refuse_pairs_out_of_order(chunk, monkeypatch):
    """Also with pieces of about 1 or 2 pairs, where the step out of order is longer than a piece."""
    monkeypatch.setattr(sd, "PIECE", chunk)
    t = rows.row_tables("spilu0_sptrsv", matrix("poisson3d_27", 30, 1))
    p = t.ent_val[:int(t.ent_ptr[t.n1])].astype(np.int64)
    many = p[np.diff(t.upd_ptr)[p] > 1][0]
    upd_a = t.upd_a.copy()
    lo, hi = t.upd_ptr[many], t.upd_ptr[many + 1]
    upd_a[lo:hi] = upd_a[lo:hi][::-1]
    with pytest.raises(AssertionError, match="not listed in the order of their entries"):
        rows.step_bits(t.n1, t.ent_ptr, t.ent_val, t.upd_ptr, upd_a, t.fac_ptr)

def _late_by_loop(t, level):
    """late_steps by its definition, row by row: the first step whose other row lies one level
    below the row, else the row's number of steps."""
    want = np.zeros(t.n1, np.int32)
    cols = t.factor_pattern[1]
    for i in range(t.n1):
        e0, e1 = int(t.ent_ptr[i]), int(t.ent_ptr[i + 1])
        want[i] = e1 - e0
        for s, e in enumerate(range(e0, e1)):
            k = int(cols[t.ent_val[e]])
            if k < i and level[k] == level[i] - 1:
                want[i] = s
                break
    return want


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen=st.sampled_from(tuple(sm.GENERATORS)), size=st.integers(1, 80), seed=st.integers(0, 1000),
       pair=st.sampled_from(sd.FACTOR_PAIRS))
def test_late_steps_property(gen, size, seed, pair):
    """late_steps against its definition on every generator, size and seed, from the joint DAG's
    levels (what t3's plan passes) — the factor rows' levels there are the factor's own."""
    mats = operands(pair, matrix(gen, size, seed))
    t = rows.row_tables(pair, *mats)
    level = sd.wavefront_levels(sd.joint_dag(pair, *mats))
    kernel = {"spilu0_sptrsv": "spilu0", "spic0_sptrsv": "spic0"}[pair]
    assert np.array_equal(level[:t.n1], sd.wavefront_levels(sd.kernel_dag(kernel, mats[0])))
    got = rows.late_steps(t.n1, t.ent_ptr, t.ent_val, t.factor_pattern[1], level)
    assert got.dtype == np.int32 and np.array_equal(got, _late_by_loop(t, level))


def test_late_steps_of_the_27_point_grid():
    """An interior row of the 27-point grid has 13 steps (ILU(0); IC(0) a 14th, the diagonal), its
    lower neighbours lie 1 to 7 levels below it (level x + 2y + 4z, natural order), and the first
    that lies one level below is its 9th, (+1, +1, −1). On the 7-point grid every lower neighbour
    lies one level below: the first step is late."""
    for pair, steps in (("spilu0_sptrsv", 13), ("spic0_sptrsv", 14)):
        mats = operands(pair, sm.poisson3d(6, points=27))
        t = rows.row_tables(pair, *mats)
        late = rows.late_steps(t.n1, t.ent_ptr, t.ent_val, t.factor_pattern[1],
                               sd.wavefront_levels(sd.joint_dag(pair, *mats)))
        inner = np.array([x + 6 * y + 36 * z for x in range(1, 5) for y in range(1, 5) for z in range(1, 5)])
        assert (np.diff(t.ent_ptr)[inner] == steps).all() and (late[inner] == 8).all()
        mats = operands(pair, sm.poisson3d(6))
        t = rows.row_tables(pair, *mats)
        late = rows.late_steps(t.n1, t.ent_ptr, t.ent_val, t.factor_pattern[1],
                               sd.wavefront_levels(sd.joint_dag(pair, *mats)))
        assert (late[1:] == 0).all()


# factor cases whose held rows take a grid (True: the 27-point grid) or not: the staged steps'
# and the register caps' rules start from that
HELD_GRID_CASES = [     # (matrix, pair, rows staged, IC(0)'s grid read across): every one a grid
    ("poisson3d_27", "spilu0_sptrsv", True, False), ("poisson3d_27", "spic0_sptrsv", True, True),
    ("poisson3d", "spilu0_sptrsv", False, False), ("poisson2d", "spic0_sptrsv", False, False),
    ("powerlaw_laplacian", "spilu0_sptrsv", False, False), ("powerlaw_laplacian", "spic0_sptrsv", True, True)]


@pytest.mark.parametrize("name,pair,staged,across", HELD_GRID_CASES)
def test_staged_steps_rule_and_t0(name, pair, staged, across, monkeypatch):
    """The dataflow executor stages held rows' steps (stages_steps) where they may (may_stage) and
    some row has steps on both sides of its first late one — the 27-point grid — and not on the
    5- and 7-point grids (every first step is late) or the power-law graph's ILU(0) (rows of few
    steps, STAGED_ILU_STEPS); the flag executor never. Staged ILU(0) rows read their solve's
    missing x_j again after the late operands, in float64 only (relooks), unless the runner's
    `relook` says otherwise. Staged or not, both
    schedules give t0's results, and so does the same plan with STAGED_STEPS off. The 27-point
    grid is 3×3×3: its held rows are staged there already."""
    mats = operands(pair, matrix(name, {"poisson2d": 36, "poisson3d_27": 27}.get(name, 64), 2))
    b = np.random.default_rng(_seed("staged", name, pair)).standard_normal(mats[0].shape[0])
    ref = _reference(pair, mats, b, "float64", ("staged", name, pair))
    v = _vector(b, "float64")
    for kind in ("sparse_fusion", "wavefront"):
        s = fs.inspect(pair, *mats, kind=kind)
        for executor in ("dataflow", "syncfree"):
            run = t3.prepare(pair, *mats, like=v, schedule=s, executor=executor)
            W = run.tables.held(run.block_rows)[0]
            assert t3.stages_steps(run, W) == (staged and executor == "dataflow"), (kind, executor)
            # the wavefront schedule fuses no solve row into a factor row: nothing to look for
            relook = staged and executor == "dataflow" and pair == "spilu0_sptrsv" and kind == "sparse_fusion"
            assert t3.relooks(run, W, torch.float64) == relook and not t3.relooks(run, W, torch.float32)
            _check(run(v), ref, pair, mats, "float64", f"{executor} {kind}")
            if relook:                 # the runner's own `relook` overrides the rule, either way
                off = t3.prepare(pair, *mats, like=v, schedule=s, executor=executor)
                off.relook = False     # before its first call: a GPU's later calls replay that one
                assert not t3.relooks(off, W, torch.float64)
                _check(off(v), ref, pair, mats, "float64", f"{executor} {kind}, no relook")
                off.relook = True
                assert t3.relooks(off, W, torch.float32)
            if t3.stages_steps(run, W):
                monkeypatch.setattr(t3, "STAGED_STEPS", False)
                assert not t3.stages_steps(run, W) and not t3.relooks(run, W, torch.float64)
                _check(run(v), ref, pair, mats, "float64", f"{executor} {kind}, one stage")
                monkeypatch.setattr(t3, "STAGED_STEPS", True)


def _some_dropped(A, seed):
    """A with about a third of its off-diagonal entries dropped, each on its own: (i, k) often
    stored without (k, i), the diagonal kept."""
    C = A.tocoo()
    keep = (C.row == C.col) | (np.random.default_rng(seed).random(C.nnz) < 0.65)
    return sp.csr_matrix((C.data[keep], (C.row[keep], C.col[keep])), shape=A.shape)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pair", sd.FACTOR_PAIRS)
def test_held_grid_rows_on_an_unsymmetric_27_point_pattern(pair, dtype):
    """The 27-point grid with about a third of its off-diagonal entries dropped one by one, so
    that (i, k) is often stored without (k, i): the held rows still take their pairs as a grid,
    staged, with the short fetch (held_grid, stages_steps, fetches_short), and give t0's results."""
    A = _some_dropped(matrix("poisson3d_27", 27, 5), _seed("unsym27"))
    mats = operands(pair, A)
    b = np.random.default_rng(_seed("unsym27", pair)).standard_normal(A.shape[0])
    ref = _reference(pair, mats, b, dtype, ("unsym27", pair, dtype))
    v = _vector(b, dtype)
    for kind in ("sparse_fusion", "wavefront"):
        run = t3.prepare(pair, *mats, like=v, schedule=fs.inspect(pair, *mats, kind=kind), executor="dataflow")
        W = run.tables.held(run.block_rows)[0]
        assert t3.held_grid(run.tables, W) and t3.stages_steps(run, W) and t3.fetches_short(run)
        _check(run(v), ref, pair, mats, dtype, f"held grid, unsymmetric 27-point, {kind}")


def _staged_case(name, pair, seed, tag, keys, monkeypatch):
    """(operands, t0's results, the vector, the launches' meta-parameters `keys` as they come) of
    a held-grid case (HELD_GRID_CASES; "arrow": held rows that take a list) for the held rows'
    variants' tests, every _syncfree launch spied on (_claimed_meta)."""
    A = _arrow_first(40) if name == "arrow" else matrix(name, {"poisson2d": 36, "poisson3d_27": 27}.get(name, 64), seed)
    mats = operands(pair, A)
    b = np.random.default_rng(_seed(tag, name, pair)).standard_normal(mats[0].shape[0])
    ref = _reference(pair, mats, b, "float64", (tag, name, pair))
    return mats, ref, _vector(b, "float64"), _claimed_meta(monkeypatch, keys, "_launch_claimed")


@pytest.mark.parametrize("name,pair,staged,across", HELD_GRID_CASES)
def test_late_look_rule_and_t0(name, pair, staged, across, monkeypatch):
    """looks_late: a staged held row (stages_steps) reads its late operands again at its late
    pivots' polls where the runner's `late_look` or, unset, LATE_LOOKS says so (on by default),
    and no row that is not staged ever does; the launch carries it (LOOK_LATE), and the results
    are t0's with it on. (The 5- and 7-point grids' pairs run by the lean rows, not this kernel.)"""
    mats, ref, v, seen = _staged_case(name, pair, 2, "late_look", ("LOOK_LATE",), monkeypatch)
    run = t3.prepare(pair, *mats, like=v, schedule=fs.inspect(pair, *mats, kind="sparse_fusion"), executor="dataflow")
    W = run.tables.held(run.block_rows)[0]
    assert t3.stages_steps(run, W) == staged and t3.looks_late(run, W) == staged
    monkeypatch.setattr(t3, "LATE_LOOKS", False)
    assert not t3.looks_late(run, W)
    monkeypatch.setattr(t3, "LATE_LOOKS", True)
    run.late_look = False
    assert not t3.looks_late(run, W)
    monkeypatch.setattr(t3, "LATE_LOOKS", False)
    run.late_look = True
    assert t3.looks_late(run, W) == staged
    seen.clear()
    _check(run(v), ref, pair, mats, "float64", "dataflow, late operands looked at")
    assert (bool(seen) != run.lean) and all(x["LOOK_LATE"] == staged for x in seen)


@pytest.mark.parametrize("name,pair", [(name, pair) for name, pair, _, _ in HELD_GRID_CASES]
                         + [("arrow", "spilu0_sptrsv"), ("arrow", "spic0_sptrsv")])
def test_short_fetch_tables_and_t0(name, pair, monkeypatch):
    """fetches_short: with FETCH_SHORT, prepare gives the dataflow executor's held rows the table
    that takes rounds off their fetch — each factor step's first pair (u0 = UPD_PTR[ENT_VAL[e]]),
    which the launch passes (U0) — and the kernel reads HOLD_LEN, which covers every row on the
    device, 0 past the factor's (device_tables), beside KIND; it reads block t's row without
    BLK_PTR where every block is one row (ONE_ROW); the results are t0's, grid or list (the
    arrow's rows). On by default; off, no such table is built."""
    mats, ref, v, seen = _staged_case(name, pair, 4, "short_fetch", ("ONE_ROW", "U0"), monkeypatch)
    s = fs.inspect(pair, *mats, kind="sparse_fusion")
    assert t3.FETCH_SHORT
    monkeypatch.setattr(t3, "FETCH_SHORT", False)
    run = t3.prepare(pair, *mats, like=v, schedule=s, executor="dataflow")
    assert run.lean or not t3.fetches_short(run)
    monkeypatch.setattr(t3, "FETCH_SHORT", True)
    run = t3.prepare(pair, *mats, like=v, schedule=s, executor="dataflow")
    W = run.tables.held(run.block_rows)[0]
    _check(run(v), ref, pair, mats, "float64", "dataflow, short fetch")
    if run.lean:                       # the lean rows' kernel: not this one
        return
    assert t3.fetches_short(run) == bool(W)
    if W:
        T, dev = run.tables, run.plan[1]
        ne = int(T.ent_ptr[T.n1])
        assert np.array_equal(dev["u0"].cpu().numpy()[:ne], np.asarray(T.upd_ptr)[T.ent_val[:ne]])
        hold = run.dev["hold_len"].cpu().numpy()
        assert len(hold) == len(T.ent_ptr) - 1 and np.array_equal(hold[:len(T.hold_len)], T.hold_len)
        assert not hold[len(T.hold_len):].any()
        one_row = run.block_rows == 1 and run.plan[0] == len(dev["blk_iter"])
        assert seen and all(x["ONE_ROW"] == one_row and x["U0"] is not None for x in seen)


@pytest.mark.parametrize("name,pair,grid", [(name, pair, True) for name, pair, _, _ in HELD_GRID_CASES]
                         + [("arrow", "spilu0_sptrsv", False), ("arrow", "spic0_sptrsv", False)])
def test_register_cap_rule(name, pair, grid):
    """The dataflow executor caps its factor kernel's registers (register_cap) where held rows take
    their pairs as a grid — every matrix but the smallest shapes (GRID_WORK) — at GRID_REGISTERS of
    the factor and of whether the rows may stage their steps (ILU(0)'s differ), and not where they
    take a list (an arrow's rows: one step of one pair); the flag executor never. The interpreter
    gets no cap (it compiles nothing)."""
    A = _arrow_first(40) if name == "arrow" else matrix(name, 36 if name == "poisson2d" else 64, 2)
    mats = operands(pair, A)
    v = _vector(np.random.default_rng(_seed("cap", name, pair)).standard_normal(mats[0].shape[0]), "float64")
    for executor in ("dataflow", "syncfree"):
        run = t3.prepare(pair, *mats, like=v, executor=executor, lean=False)
        W = run.tables.held(run.block_rows)[0]
        assert rows.grid_layout(run.tables.held(run.block_rows)) == grid and W > 0
        staged = t3.may_stage(run.tables, W)
        want = t3.GRID_REGISTERS[run.tables.factor, staged] if grid and executor == "dataflow" else 0
        unstaged = run.tables.factor == rows.ILU and not staged
        assert unstaged == (pair == "spilu0_sptrsv" and name != "poisson3d_27"), (name, pair)
        assert t3.register_cap(run.tables, W, run.data) == want, executor
        assert t3._cap(run.tables, W, run.data) == ({} if interpreting() or not want else {"maxnreg": want})


@pytest.mark.parametrize("dtype", DTYPES)
def test_slots_read_the_input_at_its_address(dtype):
    """_slots_from with `address` (t3's graphs): the kernel reads the input at the address the
    tensor holds when it runs — one launch after another, the address changed between them —
    and puts the sentinel in every output slot. On CUDA the address lives in pinned host memory,
    as in the graphs; in the interpreter in a CPU tensor."""
    n, total = 3000, 5000
    address = torch.zeros(1, dtype=torch.int64, pin_memory=DEVICE == "cuda")
    bits, sent = rows.SENTINEL_BITS[getattr(torch, dtype)], rows.SENTINEL[getattr(torch, dtype)]
    g = torch.Generator().manual_seed(_seed("address", dtype))
    vs = [(torch.rand(n, generator=g, dtype=torch.float64) + 0.5).to(DEVICE, getattr(torch, dtype)) for _ in range(2)]
    for v in vs + vs[:1]:
        address[0] = v.data_ptr()
        slots = t3_launch._slots_from(vs[1], total, address=address)
        assert torch.equal(slots[:n], v)
        assert bool((slots.view(bits)[n:] == sent).all())


@pytest.mark.parametrize("pair", ["spilu0_sptrsv", "spic0_sptrsv"])
@pytest.mark.parametrize("lean", [False, True])
def test_factor_calls_keep_their_outputs(pair, lean):
    """A prepared factor pair called with two vectors (four calls on CUDA) returns each call's own
    results: on CUDA the dataflow executor runs its first call eagerly and then replays one CUDA
    graph (replays_graph) whose buffers every call rewrites, so what it returns must be copies,
    and which reads each call's input at the address the call stores (a strided vector's
    contiguous copy in the fourth). In the interpreter every call runs eagerly, and more calls
    would add nothing. The values as flags on the 27-point grid (the IC(0)'s graph prepares ahead,
    the ILU(0)'s does not), the lean rows (whose graph holds a cooperative launch) on the 7-point grid."""
    mats = operands(pair, matrix("poisson3d", 64, 2) if lean else matrix("poisson3d_27", 27, 2))
    rng = np.random.default_rng(_seed("graph", pair))
    bs = [rng.standard_normal(mats[0].shape[0]) for _ in range(2)]
    refs = [_reference(pair, mats, b, "float64", ("graph", pair, lean, i)) for i, b in enumerate(bs)]
    run = t3.prepare(pair, *mats, like=_vector(bs[0], "float64"), executor="dataflow", lean=lean)
    assert run.lean is lean
    assert t3.replays_graph(run) == (DEVICE == "cuda")
    first = run(_vector(bs[0], "float64"))
    assert run.graph is None
    second = run(_vector(bs[1], "float64"))
    assert (run.graph is not None) == (DEVICE == "cuda")
    if DEVICE == "cuda":
        third = run(_vector(bs[0], "float64"))
        _check(third, refs[0], pair, mats, "float64", "third call")
        strided = torch.stack([_vector(bs[1], "float64"), _vector(bs[0], "float64")], dim=1)[:, 0]
        fourth = run(strided)               # the replay reads the input at the address each call stores
        _check(fourth, refs[1], pair, mats, "float64", "fourth call, a strided vector")
        _check(third, refs[0], pair, mats, "float64", "third call, after the fourth")
    _check(first, refs[0], pair, mats, "float64", "first call, after the others")
    _check(second, refs[1], pair, mats, "float64", "second call, after the others")


@pytest.mark.skipif(DEVICE != "cuda", reason="t3 captures graphs on CUDA alone; the interpreter runs calls eagerly")
@pytest.mark.parametrize("pair", ["spilu0_sptrsv", "spic0_sptrsv"])
@pytest.mark.parametrize("lean", [False, True])
def test_capture_outlasts_dead_cycles(pair, lean, monkeypatch):
    """A graph captured while a dead reference cycle holds an earlier Prepared with its own graph,
    and enough containers are made inside the capture for Python's collector to run there unless
    paused: t3 pauses it while it captures (_captured), since destroying a graph invalidates
    the capture under way (a lean IC(0) graph's capture failed so on an H100, 2026-12-06). Its
    results are t0's, and the earlier Prepared is gone once the capture is over."""
    mats = operands(pair, matrix("poisson3d", 64, 2) if lean else matrix("poisson3d_27", 27, 2))
    b = np.random.default_rng(_seed("cycle", pair, lean)).standard_normal(mats[0].shape[0])
    ref = _reference(pair, mats, b, "float64", ("cycle", pair, lean))
    held = [t3.prepare(pair, *mats, like=_vector(b, "float64"), executor="dataflow", lean=lean)]
    held[0](_vector(b, "float64"))
    held[0](_vector(b, "float64"))
    assert held[0].graph is not None
    gone = weakref.ref(held[0])
    name = "launch_lean" if lean else "_run_syncfree"       # the kernel's launch, in the capture and out of it
    launch, made = getattr(t3, name), []

    def launch_in_a_cycle(*a, **k):
        if held and torch.cuda.is_current_stream_capturing():
            cycle = [held.pop()]
            cycle.append(cycle)
            del cycle
            made.extend([] for _ in range(5 * gc.get_threshold()[0]))     # past the youngest generation's threshold
        return launch(*a, **k)
    monkeypatch.setattr(t3, name, launch_in_a_cycle)
    run = t3.prepare(pair, *mats, like=_vector(b, "float64"), executor="dataflow", lean=lean)
    run(_vector(b, "float64"))
    second = run(_vector(b, "float64"))             # captured with the cycle dead
    assert made and run.graph is not None
    _check(second, ref, pair, mats, "float64", "the call that captured")
    _check(run(_vector(b, "float64")), ref, pair, mats, "float64", "a replay")
    gc.collect()
    assert gone() is None


@pytest.mark.parametrize("pair,build,match", [
    ("spic0_sptrsv", _ic0_breaks_at_3, r"IC\(0\) breaks down in row 3: pivot"),
    ("spilu0_sptrsv", _ilu0_breaks_at_1, r"ILU\(0\) breaks down in row 1: pivot")])
def test_breakdown_raises_on_every_call(pair, build, match):
    """A prepared factor pair whose factorisation breaks down raises the same ValueError on every
    call, not only the first: on CUDA the dataflow executor's calls after the first replay its
    graph (replays_graph) and learn of the breakdown from the graph's flag, read into pinned memory
    (the IC(0)'s after rows.factor_out, its graph preparing ahead; the ILU(0)'s beside it, its graph
    testing its pivots: EARLY_FLAG)."""
    A = build()
    v = _vector(np.random.default_rng(_seed("breaks", pair)).standard_normal(A.shape[0]), "float64")
    run = t3.prepare(pair, A, like=v, executor="dataflow")
    for call in range(3):
        with pytest.raises(ValueError, match=match):
            run(v)
    assert (run.graph is not None) == t3.replays_graph(run) == (DEVICE == "cuda")


PIVOTS = (1.0, -1.0, 0.0, -0.0, 1e-300, -1e-300, 1e300, float("inf"), float("-inf"), float("nan"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(picks=st.lists(st.sampled_from(PIVOTS), min_size=1, max_size=40), kind=st.sampled_from(["ilu0", "ic0"]),
       dtype=st.sampled_from(DTYPES))
def test_pivot_test_kernel_judges_as_validation_does(picks, kind, dtype):
    """The pivot rule exists twice — validation.unusable_pivots (torch, t1) and the kernel behind
    rows.breakdown_flag (t2, t3) — so the two must name the same lowest unusable row on every kind
    of value: signed zeros, the smallest and largest magnitudes, both infinities, NaN."""
    pivots = torch.tensor(picks, dtype=getattr(torch, dtype), device=DEVICE)
    n = len(picks)
    tables = type("Tables", (), {"n1": n, "factor": rows.ILU if kind == "ilu0" else rows.IC})()
    flag = rows.breakdown_flag(tables, {"pivot_at": torch.arange(n, dtype=torch.int32, device=DEVICE)}, pivots)
    bad = validation.unusable_pivots(kind, pivots).cpu()
    expected = n - int(bad.nonzero()[0, 0]) if bool(bad.any()) else 0
    assert int(flag[0]) == expected, (kind, picks)
    marks = torch.full((n,), rows.PIVOT, dtype=torch.uint8, device=DEVICE)      # factor_out's test of them
    dt = pivots.dtype
    out, flag, _ = rows.factor_out(tables, pivots.clone(), marks)
    assert int(flag[0]) == expected, (kind, picks, "factor_out")
    assert torch.equal(out.view(rows.SENTINEL_BITS[dt]), pivots.view(rows.SENTINEL_BITS[dt]))


def _bad_pivots(values, t, pair, rows_hit):
    """A copy of a factor's `values` whose pivots in rows `rows_hit` stop the factorisation (ILU(0):
    NaN, IC(0): negative), for the tests of the breakdown flag's read."""
    broken = values.clone()
    for i in rows_hit:
        broken[int(t.pivot_at[i])] = float("nan") if pair == "spilu0_sptrsv" else -1.0
    return broken


@pytest.mark.parametrize("pair", ["spilu0_sptrsv", "spic0_sptrsv"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_factor_out_copies_and_resets(pair, dtype):
    """rows.factor_out, which follows each replay of t3's graph: the copy it returns is the factor
    bit for bit, and the vector result's copy (same launch) is the vector's; VAL afterwards holds
    the sentinel exactly where a step rewrites it and A's values elsewhere — the template every
    replay starts from; its flag names the lowest row whose pivot stops the factorisation (here
    none; with one, the row of the lowest)."""
    mats = operands(pair, matrix("poisson3d", 6, 3))
    b = np.random.default_rng(_seed("factor_out", pair, dtype)).standard_normal(mats[0].shape[0])
    run = t3.prepare(pair, *mats, like=_vector(b, dtype), executor="dataflow")
    factor = run(_vector(b, dtype))[0].values()
    t = run.tables
    bits, sent = rows.SENTINEL_BITS[factor.dtype], rows.SENTINEL[factor.dtype]
    marks = rows.entry_marks(t, factor.device)
    val = factor.clone()
    vec = torch.rand(t.vec_len, dtype=factor.dtype, device=factor.device) + 0.5
    out, flag, outs = rows.factor_out(t, val, marks, vec)
    assert torch.equal(out.view(bits), factor.view(bits)) and int(flag[0]) == 0
    assert len(outs) == 1 and torch.equal(outs[0], rows.vector_outs(t, vec)[0])
    assert outs[0].data_ptr() != vec.data_ptr()
    at = torch.from_numpy(t.rewritten.astype(np.int64)).to(val.device)
    want = run.values.clone()
    want.view(bits)[at] = sent
    assert torch.equal(val.view(bits), want.view(bits))
    assert (marks.cpu().numpy() & rows.PIVOT).nonzero()[0].tolist() == t.pivot_at.tolist()
    # the pivots' marks alone (t3's lean rows, which read no rewritten entry): VAL is left as it is
    pivots_only = rows.entry_marks(t, factor.device, rewritten=False)
    assert (pivots_only.cpu().numpy() == (marks.cpu().numpy() & rows.PIVOT)).all()
    val = factor.clone()
    out, flag, _ = rows.factor_out(t, val, pivots_only)
    assert torch.equal(out.view(bits), factor.view(bits)) and int(flag[0]) == 0
    assert torch.equal(val.view(bits), factor.view(bits))
    rows_hit = [5, 2 * len(t.pivot_at) // 3]
    out, flag, outs = rows.factor_out(t, _bad_pivots(factor, t, pair, rows_hit), marks)
    assert outs == ()
    with pytest.raises(ValueError, match=f"breaks down in row {min(rows_hit)}:"):
        rows.raise_flagged(t, out, flag)


class _Driven:
    """A stand-in for what _replay drives (a CUDA graph's replay, an event's record and wait), counting calls:
    the interpreter captures no graphs, so a replay here launches nothing and VAL holds a finished factor.
    With `lands` = (flag, host), the flag's copy lands in `host` only when synchronize() is called, so a
    reader that does not wait reads the stale value (t3's graphs that prepare ahead)."""

    def __init__(self, lands=None):
        self.calls, self.lands = [], lands

    def replay(self):
        self.calls.append("replay")

    def record(self):
        self.calls.append("record")

    def synchronize(self):
        self.calls.append("synchronize")
        if self.lands is not None:
            self.lands[1].copy_(self.lands[0].cpu())


@pytest.mark.parametrize("pair", ["spilu0_sptrsv", "spic0_sptrsv"])
def test_results_wait_for_a_flag_in_flight(pair):
    """rows.results with `ready` (t3's graphs that prepare ahead: the flag read into pinned memory,
    waited for only once the factor is made) waits for the read before it tests the flag: a
    breakdown is reported at the lowest bad row, and a clean flag gives the factor and x."""
    mats = operands(pair, matrix("poisson3d", 6, 3))
    b = np.random.default_rng(_seed("in_flight", pair)).standard_normal(mats[0].shape[0])
    run = t3.prepare(pair, *mats, like=_vector(b, "float64"), executor="dataflow")
    factor, x = run(_vector(b, "float64"))
    t, marks = run.tables, rows.entry_marks(run.tables, factor.device)
    rows_hit = [3, len(t.pivot_at) // 2]
    for val, bad in ((factor.values().clone(), None), (_bad_pivots(factor.values(), t, pair, rows_hit), min(rows_hit))):
        out, flag, _ = rows.factor_out(t, val, marks)
        host = torch.zeros(1, dtype=torch.int32)           # the stale value, as before the copy lands
        ready = _Driven(lands=(flag, host))
        if bad is None:
            got = rows.results(t, run.dev, out, (x,), flag=host, ready=ready)
            assert torch.equal(got[0].values(), factor.values()) and got[1] is x
        else:
            with pytest.raises(ValueError, match=f"breaks down in row {bad}:"):
                rows.results(t, run.dev, out, (x,), flag=host, ready=ready)
        assert ready.calls == ["synchronize"]


class _Tests(_Driven):
    """A stand-in graph whose replay does what an EARLY_FLAG graph does last: test VAL's pivots into
    its flag (rows.breakdown_flag)."""

    def __init__(self, run):
        super().__init__()
        self.run = run

    def replay(self):
        super().replay()
        g = self.run.graph
        rows.breakdown_flag(self.run.tables, self.run.dev, g.val, g.flag)


@pytest.mark.parametrize("pair", ["spilu0_sptrsv", "spic0_sptrsv"])
@pytest.mark.parametrize("form", ["device", "ahead", "early"])
def test_replay_reads_the_flag_every_way(pair, form):
    """t3's _graphed after its capture (_replay, then rows.results) on a stand-in graph whose VAL holds a
    finished factor, its flag read each way _replay reads it: from the device; into pinned memory after
    rows.factor_out, an event after it and the preparation ahead replayed behind it; or, where the
    graph tests its pivots itself (EARLY_FLAG, here with no side stream), into pinned memory before
    factor_out. The pinned copy is waited for once the factor is made. The factor and x come back as
    copies, and a broken pivot raises at the lowest bad row. On CUDA the real graphs' calls are
    tested too (test_factor_calls_keep_their_outputs, test_breakdown_raises_on_every_call: the IC(0)'s
    graph prepares ahead, the ILU(0)'s tests its pivots)."""
    ahead, early = form == "ahead", form == "early"
    mats = operands(pair, matrix("poisson3d", 6, 3))
    b = np.random.default_rng(_seed("replay", pair)).standard_normal(mats[0].shape[0])
    v = _vector(b, "float64")
    run = t3.prepare(pair, *mats, like=v, executor="dataflow", lean=False)
    factor = run(v)[0].values()
    t, marks = run.tables, rows.entry_marks(run.tables, factor.device)
    for val, bad in ((factor.clone(), None), (_bad_pivots(factor, t, pair, [4]), 4)):
        vec = torch.rand(t.vec_len, dtype=factor.dtype, device=factor.device)
        graph, prep, event = _Tests(run) if early else _Driven(), _Driven(), _Driven()
        pinned = t3._Pinned(prep if ahead else None, torch.zeros(1, dtype=torch.int32), event)
        run.graph = t3._Graph(graph, np.zeros(1, dtype=np.int64), val, vec, marks,
                              torch.zeros(1, dtype=torch.int32, device=factor.device), (None, None),
                              pinned if ahead or early else None)
        want = val.clone(), rows.vector_outs(t, vec)[0].clone()
        if bad is None:
            got = t3._graphed(run, v)
            assert torch.equal(got[0].values(), want[0]) and torch.equal(got[1], want[1])
            assert got[1].data_ptr() != vec.data_ptr()
        else:
            with pytest.raises(ValueError, match=f"breaks down in row {bad}:"):
                t3._graphed(run, v)
        assert graph.calls == ["replay"]
        assert prep.calls == (["replay"] if ahead else [])
        assert event.calls == (["record", "synchronize"] if ahead or early else [])
        reset = val.view(rows.SENTINEL_BITS[val.dtype])[(marks & rows.REWRITTEN) != 0] == rows.SENTINEL[val.dtype]
        assert bool(reset.all()) == (not ahead)       # the sentinel back for the next replay, or left to prep
        assert run.graph.address[0] == v.data_ptr()


def _broken(name, size, pair, how, seed):
    """A matrix of `name` whose ILU(0) / IC(0) breaks down, and how: "row" at a row drawn by
    `seed` (IC(0): a_ii shrunk to 1e-12, so l_ii² = a_ii − Σ l_ik² < 0; ILU(0): a_ik = a_ki = 1e308
    for a lower neighbour k, so u_ii = a_ii − l_ik·u_ki overflows), "first" at row 0, whose
    pivot no step rewrites (ILU(0) with a_00 = 0)."""
    A = sp.csr_matrix(matrix(name, size, seed % 7), copy=True)
    if how == "first":
        A[0, 0] = 0.0
        return A
    rng = np.random.default_rng(seed)
    lower = sp.tril(A, -1).tocsr()
    i = int(rng.choice(np.flatnonzero(np.diff(lower.indptr) > 0)))
    if pair == "spic0_sptrsv":
        A[i, i] = 1e-12
    else:
        k = int(rng.choice(lower.indices[lower.indptr[i]:lower.indptr[i + 1]]))
        A[i, k] = A[k, i] = 1e308
    return A


BREAKDOWN_CASES = [("poisson3d_27", 27, "spic0_sptrsv", "row", 2), ("poisson3d", 64, "spilu0_sptrsv", "row", 1),
                   ("poisson2d", 36, "spic0_sptrsv", "row", 1), ("powerlaw_laplacian", 60, "spilu0_sptrsv", "row", 1),
                   ("poisson2d", 36, "spilu0_sptrsv", "first", 1)]


@pytest.mark.parametrize("name,size,pair,how,seed", BREAKDOWN_CASES)
def test_breakdown_row_is_t0s(name, size, pair, how, seed, monkeypatch):
    """t3's dataflow executor reports a breakdown at the row t0 stops at, whether the row is held
    (the 27-point grid's as a grid, the 3D and 2D grids' as a list) or walks beside held rows (the
    power-law graph's ILU(0) at HOLD_SHARE 0.6), and for a pivot no step rewrites (row 0 of
    ILU(0)); on CUDA on three calls, the third replaying its graph. A kernel tests the pivots
    after the factor's (rows.breakdown_flag) and leaves the lowest bad row for one read
    (rows.raise_flagged)."""
    if name == "powerlaw_laplacian":
        monkeypatch.setattr(rows, "HOLD_SHARE", 0.6)
        monkeypatch.setattr(rows, "_PATTERNS", {})
    A = _broken(name, size, pair, how, seed)
    b = np.random.default_rng(_seed("broken", name, pair, seed)).standard_normal(A.shape[0])
    with pytest.raises(ValueError, match="breaks down in row") as want:
        registry.get("sparse_fusion", "t0_numpy", pair)(A, b)
    row = re.search(r"breaks down in row (\d+)", str(want.value)).group(1)
    if how == "first":
        assert row == "0"
    v = _vector(b, "float64")
    run = t3.prepare(pair, A, like=v, executor="dataflow", lean=False)    # the lean rows' own test is below
    assert run.data
    if name == "powerlaw_laplacian":
        assert run.tables.walks, "the case must walk some rows beside held ones"
    for call in range(3 if DEVICE == "cuda" else 1):
        with pytest.raises(ValueError, match=rf"breaks down in row {row}: pivot"):
            run(v)


def _check_spans(t, share):
    """held_spans' promises on the tables t, built at HOLD_SHARE = share: a held row holds its
    entries up to the last one its steps touch (every step entry and pair target of the row lies
    in that prefix, the last one ends it, and it is at most HELD_WIDTH); (W, S, C) covers every
    held row and every row it covers is held; each of the three sizes leaves out at most 1 − share
    of the rows with steps, so at least 1 − 3·(1 − share) of them are held unless some row is
    wider than HELD_WIDTH; rows without steps hold nothing."""
    W, S, C = t.hold_shape
    busy = np.diff(t.ent_ptr[:t.n1 + 1]) > 0
    assert (t.hold_len[~busy] == 0).all()
    for v in np.flatnonzero(busy):
        steps = t.ent_val[t.ent_ptr[v]:t.ent_ptr[v + 1]].astype(np.int64)
        pairs = t.upd_ptr[steps + 1] - t.upd_ptr[steps]
        local = np.concatenate([steps] + [t.upd_a[t.upd_ptr[p]:t.upd_ptr[p + 1]] for p in steps]) - t.fac_ptr[v]
        span = int(local.max()) + 1
        assert local.min() >= 0 and span <= t.fac_ptr[v + 1] - t.fac_ptr[v]
        if t.hold_len[v]:
            assert t.hold_len[v] == span <= min(W, rows.HELD_WIDTH) and len(steps) <= S and pairs.max() <= C
        else:                                  # a row that fits the shape is held
            assert span > W or len(steps) > S or pairs.max() > C or span > rows.HELD_WIDTH
    if busy.any():
        assert (t.hold_len[busy] > 0).mean() >= 1 - 3 * (1 - share) - 1e-9 or \
            (np.diff(t.fac_ptr)[busy] > rows.HELD_WIDTH).any()


def test_held_spans():
    """held_spans on a power-law graph: its promises (_check_spans), and a shape far narrower than
    the graph's longest rows."""
    A = sd.csr(sm.powerlaw_laplacian(400, seed=3))
    t = rows.row_tables("spilu0_sptrsv", A)
    _check_spans(t, rows.HOLD_SHARE)
    assert t.hold_len.max() <= t.held_shape[0] < int(np.diff(A.indptr).max())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen=st.sampled_from(tuple(sm.GENERATORS)), size=st.integers(1, 150), seed=st.integers(0, 1000),
       pair=st.sampled_from(sd.FACTOR_PAIRS), share=st.sampled_from([0.3, 0.6, 0.9, 0.999, 1.0]))
def test_held_spans_property(gen, size, seed, pair, share):
    """_check_spans over every generator, size, seed and factor pair, at several shares."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rows, "HOLD_SHARE", share)
        _check_spans(rows.row_tables(pair, *operands(pair, matrix(gen, size, seed))), share)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen=st.sampled_from(tuple(sm.GENERATORS)), size=st.integers(1, 60), seed=st.integers(0, 1000),
       pair=st.sampled_from(sd.FACTOR_PAIRS), kind=st.sampled_from(fs.KINDS),
       executor=st.sampled_from(["syncfree", "dataflow"]), R=st.sampled_from([1, 2, 4]), fuse=st.booleans(),
       share=st.sampled_from([0.5, 0.999]), dtype=st.sampled_from(DTYPES))
def test_factor_executors_property(gen, size, seed, pair, kind, executor, R, fuse, share, dtype):
    """The flag executor and the dataflow executor (the same kernel with the values as flags) give
    t0's factor and solve on every generator, size and schedule, with rows fused or apart, and
    with some rows walking beside the held ones (a low HOLD_SHARE)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rows, "HOLD_SHARE", share)
        mp.setattr(rows, "_PATTERNS", {})
        mats = operands(pair, matrix(gen, size, seed))
        b = np.random.default_rng(seed).standard_normal(mats[0].shape[0])
        ref = _reference(pair, mats, b, dtype, ("factor_property", gen, size, seed, pair, dtype))
        v = _vector(b, dtype)
        run = t3.prepare(pair, *mats, like=v, schedule=fs.inspect(pair, *mats, kind=kind), executor=executor,
                         block_rows=R, fuse_rows=fuse, lean=False)
        assert run.data == (executor == "dataflow")
        _check(run(v), ref, pair, mats, dtype, f"{executor} {kind} R={R} fuse={fuse} share={share}")


@pytest.mark.parametrize("pair", sd.FACTOR_PAIRS)
@pytest.mark.parametrize("runner", ["t2", "levels", "syncfree", "syncfree-fused", "dataflow", "dataflow-fused"])
def test_held_and_walked_rows_together(pair, runner, monkeypatch):
    """With HOLD_SHARE low, some factor rows are held and the others walk in the same launches
    (WALK) — ILU(0) on a power-law graph, IC(0) on the 27-point stencil, whose boundary rows are
    shorter (the graph's rows of tril(A) are all alike): t2, the level executor, the flag
    executor and the dataflow executor (its kernel with the values as flags; rows apart, and rows
    fused with their solve rows, held and walked) still give t0's factor and solve."""
    monkeypatch.setattr(rows, "HOLD_SHARE", 0.6)
    monkeypatch.setattr(rows, "_PATTERNS", {})          # no tables cached under the old share
    gen, size = ("powerlaw_laplacian", 60) if pair == "spilu0_sptrsv" else ("poisson3d_27", 27)
    mats = operands(pair, matrix(gen, size, 5))
    t = rows.row_tables(pair, *mats)
    busy = np.diff(t.ent_ptr[:t.n1 + 1]) > 0
    held = t.hold_len > 0
    assert t.walks and held.any() and (busy & ~held).any() and t.held(2) != (0, 0, 0)
    b = np.random.default_rng(11).standard_normal(mats[0].shape[0])
    ref = _reference(pair, mats, b, "float64", ("held_walked", pair))
    v = _vector(b, "float64")
    if runner == "t2":
        out = t2.prepare(pair, *mats, like=v)(v)
    else:
        kind = "sparse_fusion" if runner.endswith("-fused") else "wavefront"
        run = t3.prepare(pair, *mats, like=v, schedule=fs.inspect(pair, *mats, kind=kind),
                         executor=runner.split("-")[0], block_rows=2, fuse_rows=runner.endswith("-fused") or None)
        assert run.data == runner.startswith("dataflow")
        if runner.endswith("-fused"):
            fuse = t3.fused_rows(run.schedule, mats)[:t.n1]
            assert run.fused > 0 and (fuse[~held & busy] >= 0).any() and (fuse[held] >= 0).any()
        out = run(v)
    _check(out, ref, pair, mats, "float64", f"{runner} held and walked")


def _long_walks(pair, n, seed):
    """SPD with random off-diagonal values, whose walked factor rows are n entries long: for
    ILU(0) its first four rows and columns full, so rows 1–3 walk (every entry a step rewrites)
    and every later row reads row 3's entry in its own column, late in that row; for IC(0),
    whose tril rows are what walk, a full last row and column as _arrow_last's."""
    rng = np.random.default_rng(seed)
    A = np.zeros((n, n))
    if pair == "spilu0_sptrsv":
        A[:4, :] = rng.uniform(-1, 1, (4, n))
        A[:, :4] = A[:4, :].T
    else:
        A[-1, :] = rng.uniform(-1, 1, n)
        A[:, -1] = A[-1, :]
    np.fill_diagonal(A, 2.0 * n)
    return sp.csr_matrix(A)


def _hub_walks(n, seed):
    """SPD with random off-diagonal values, two hubs as on a power-law graph: rows and columns 0
    and 1 each hold a random half of the others, and row 1's ILU(0) step (its entry in column 0)
    rewrites only the columns row 0 shares with it, so the walked row 1 keeps A's values in the
    rest, between the ones it rewrites; every later row of row 1 reads row 1's entry in its own
    column, rewritten (polled until row 1 stores it) or not (A's value)."""
    rng = np.random.default_rng(seed)
    A = np.zeros((n, n))
    for hub in (0, 1):
        cols = np.flatnonzero(rng.random(n) < 0.5)
        A[hub, cols] = rng.uniform(-1, 1, cols.size)
    A[0, 1] = A[1, 0] = 0.5
    A = np.triu(A, 1) + np.triu(A, 1).T
    np.fill_diagonal(A, 2.0 * n)
    return sp.csr_matrix(A)


def _walked_dataflow_is_t0s(pair, mats, fuse, seed, key, **options):
    """The dataflow executor (values as flags, walked rows) on mats against t0, fused or apart,
    with `options` to prepare; returns the prepared run."""
    n = mats[0].shape[0]
    b = np.random.default_rng(seed).standard_normal(n)
    ref = _reference(pair, mats, b, "float64", (key, pair))
    v = _vector(b, "float64")
    run = t3.prepare(pair, *mats, like=v, executor="dataflow", fuse_rows=fuse, lean=False, **options)
    assert run.data
    _check(run(v), ref, pair, mats, "float64", f"{key}, fuse={fuse}")
    return run


@pytest.mark.parametrize("fuse", [False, True])
def test_walked_hub_rows(fuse):
    """A walked hub row whose steps rewrite some of its entries and leave A's values between them
    (in VAL from the start, in DATA mode), which later rows wait on, still gives t0's factor and
    solve on the dataflow executor, rows fused with their solve rows or apart."""
    pair = "spilu0_sptrsv"
    mats = operands(pair, _hub_walks(261, 5))
    t = rows.row_tables(pair, *mats)
    rew = np.diff(np.searchsorted(t.rewritten, t.fac_ptr))
    assert t.walks and t.walked[1] and 2 < rew[1] < np.diff(t.fac_ptr)[1] - 20
    _walked_dataflow_is_t0s(pair, mats, fuse, 13, "hub_walks")


@pytest.mark.parametrize("fuse", [False, True])
def test_walked_rows_take_blocks_of_their_own(fuse):
    """Where blocks hold several rows, each walked factor row gets a block of its own (WALK_ALONE:
    its walk then waits for no held row's operands), the held rows still share theirs, and the
    factor and solve are t0's."""
    pair = "spilu0_sptrsv"
    mats = operands(pair, _hub_walks(261, 5))
    run = _walked_dataflow_is_t0s(pair, mats, fuse, 17, "hub_walks_alone", block_rows=4)
    ptr, seq = (run.plan[1][k].cpu().numpy() for k in ("blk_ptr", "blk_iter"))
    size = np.diff(ptr)[np.searchsorted(ptr, np.arange(len(seq)), side="right") - 1]
    walked = run.tables.walked_iterations[seq]
    assert walked.sum() == run.tables.walked.sum() > 0
    assert (size[walked] == 1).all() and (size[~walked] > 1).any()


def _walking_factor(case, monkeypatch):
    """(operands, block rows) of the graph tests' factor cases: "hubs", ILU(0) with two walked hubs;
    "ic_walks", IC(0) on the 27-point stencil with HOLD_SHARE low (its boundary rows walk);
    "ilu27", ILU(0) on it with every row held."""
    if case == "hubs":
        return operands("spilu0_sptrsv", _hub_walks(261, 5)), 4
    if case == "ic_walks":
        monkeypatch.setattr(rows, "HOLD_SHARE", 0.6)
        monkeypatch.setattr(rows, "_PATTERNS", {})
    pair = "spic0_sptrsv" if case == "ic_walks" else "spilu0_sptrsv"
    return operands(pair, matrix("poisson3d_27", 27, 5)), 2


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 3000), k=st.integers(0, 3000), dtype=st.sampled_from(["float64", "float32"]))
def test_copy_at_copies_the_named_positions_alone(n, k, dtype):
    """launch.copy_at (OWN_COPY_AT): dst[at] = src[at] at distinct positions, in any number
    (none included, and more than one block's), every other entry of dst as it was."""
    rng = np.random.default_rng(n * 7919 + k)
    before, src = rng.standard_normal(n), rng.standard_normal(n)
    at = rng.permutation(n)[:k]
    dst = _vector(before, dtype)
    t3_launch.copy_at(dst, _vector(src, dtype), torch.from_numpy(at).to(dst.device))
    want = _vector(before, dtype).cpu()
    want[at] = _vector(src, dtype).cpu()[at]
    assert torch.equal(dst.cpu(), want)


@pytest.mark.parametrize("pair, fuse, copy_at", [("spilu0_sptrsv", False, False), ("spilu0_sptrsv", True, False),
                                                  ("spic0_sptrsv", False, False), ("spic0_sptrsv", True, False),
                                                  ("spilu0_sptrsv", False, True), ("spic0_sptrsv", True, True)])
def test_graph_own_copies_back_only_walked_entries(pair, fuse, copy_at, monkeypatch):
    """t3's graph keeps OWN from call to call and copies back from A's values only the walked rows'
    entries (OWN_WALKED, _graph_own; _own_back, with torch's gather and scatter or, OWN_COPY_AT, one
    Triton launch): those are all a call writes in OWN, so each call, run as the graph runs it,
    still gives t0's factor and solve, and OWN is A's values everywhere else — ILU(0) with two
    walked hubs, IC(0) on the 27-point stencil with HOLD_SHARE low (its boundary rows walk), rows
    apart and fused with their solve rows."""
    monkeypatch.setattr(t3, "OWN_COPY_AT", copy_at)
    mats, R = _walking_factor("hubs" if pair == "spilu0_sptrsv" else "ic_walks", monkeypatch)
    key = f"own_{pair}_{fuse}"
    run = _walked_dataflow_is_t0s(pair, mats, fuse, 19, key, block_rows=R)
    t = run.tables
    spans = [np.arange(t.fac_ptr[v], t.fac_ptr[v + 1]) for v in np.flatnonzero(t.walked)]
    assert t.walks and len(spans) > 0 and (t.walked_entries == np.concatenate(spans)).all()
    own, walked = t3._graph_own(run)
    assert (walked.cpu().numpy() == t.walked_entries).all() and own.data_ptr() != run.values.data_ptr()
    outside = np.ones(run.values.numel(), dtype=bool)
    outside[t.walked_entries] = False
    for seed in (23, 29):
        b = np.random.default_rng(seed).standard_normal(mats[0].shape[0])
        v = _vector(b, "float64")
        t3._own_back(run, own, walked)
        assert torch.equal(own, run.values)
        val, _, vec = t3._data_buffers(run, v)
        t3._run_syncfree(run, val, vec, own)
        out = rows.results(t, run.dev, val, rows.vector_outs(t, vec))
        _check(out, _reference(pair, mats, b, "float64", (key, seed)), pair, mats, "float64",
               f"{pair} fuse={fuse}, OWN kept, call {seed}")
        assert torch.equal(own[outside], run.values[outside])
        assert not torch.equal(own[~outside], run.values[~outside])     # the walked rows worked there
    monkeypatch.setattr(t3, "OWN_WALKED", False)
    own, walked = t3._graph_own(run)                 # a copy of every entry, all rewritten each call
    assert walked is None and own.data_ptr() != run.values.data_ptr() and torch.equal(own, run.values)


@pytest.mark.parametrize("case, fuse", [("hubs", False), ("hubs", True), ("hubs_fresh", False), ("ic_walks", True),
                                        ("ilu27", False)])
def test_graph_prepares_the_next_call_ahead(case, fuse, monkeypatch):
    """PREP_AHEAD's two graphs, each call run as they run it (whether or not prepares_ahead picks
    the case), on buffers kept from call to call: the call's launches (_main_launches: the input
    read at its address, the kernel), rows.factor_out without its reset, then the next call's
    preparation (_prep_ahead, the reset there). Each call gives t0's factor and solve, and after each
    preparation VAL is the sentinel template again, every output slot the sentinel and OWN A's
    values. ILU(0) with walked hubs (OWN's walked entries copied back, or with OWN_WALKED off
    every entry), IC(0) on the 27-point stencil with walked boundary rows, ILU(0) on it with every
    row held (OWN is A's values)."""
    pair = "spic0_sptrsv" if case == "ic_walks" else "spilu0_sptrsv"
    mats, R = _walking_factor(case.removesuffix("_fresh"), monkeypatch)
    monkeypatch.setattr(t3, "OWN_WALKED", case != "hubs_fresh")
    key = f"ahead_{case}_{fuse}"
    run = _walked_dataflow_is_t0s(pair, mats, fuse, 43, key, block_rows=R)
    t = run.tables
    assert t3.prepares_ahead(run) == t3.resets_ahead(run) == (pair == "spic0_sptrsv")   # IC(0) rewrites every entry
    own, walked = t3._graph_own(run)
    assert (own is run.values) == (case == "ilu27") and (walked is None) == (case in ("ilu27", "hubs_fresh"))
    bits, sent = rows.SENTINEL_BITS[torch.float64], rows.SENTINEL[torch.float64]
    val = run.data_template.clone()
    marks = rows.entry_marks(t, val.device)
    b0 = np.random.default_rng(1).standard_normal(mats[0].shape[0])
    slots = t3_launch.new_slots(_vector(b0, "float64"), t.vec_len)
    address = torch.zeros(1, dtype=torch.int64, pin_memory=DEVICE == "cuda")
    flag = torch.zeros(1, dtype=torch.int32, device=val.device)
    t3._prep_ahead(run, val, marks, slots, own, walked)
    rewritten = torch.from_numpy(t.rewritten.astype(np.int64)).to(val.device)
    launch, starts = t3._run_syncfree, []

    def launch_from_the_template(run_, val_, vec_, own_=None):     # the interpreter's programs run in order and
        starts.append(vec_)                                          # would never read a stale slot: checked here
        assert bool((vec_.view(bits)[t.n1:] == sent).all()), "an output slot without the sentinel at the kernel's start"
        assert torch.equal(val_.view(bits), run.data_template.view(bits)) and torch.equal(own_, run.values)
        return launch(run_, val_, vec_, own_)
    monkeypatch.setattr(t3, "_run_syncfree", launch_from_the_template)
    for seed in (47, 53, 59):
        b = np.random.default_rng(seed).standard_normal(mats[0].shape[0])
        v = _vector(b, "float64")
        address[0] = v.data_ptr()
        t3._main_launches(run, val, slots, own, address, flag)
        out, flag, outs = rows.factor_out(t, val, marks, slots, flag, reset=False)
        assert not bool((val.view(bits)[rewritten] == sent).any())      # the kernel wrote them all
        t3._prep_ahead(run, val, marks, slots, own, walked)
        _check(rows.results(t, run.dev, out, outs, flag=flag), _reference(pair, mats, b, "float64", (key, seed)),
               pair, mats, "float64", f"{case} fuse={fuse}, prepared ahead, call {seed}")
        assert torch.equal(val.view(bits), run.data_template.view(bits)) and torch.equal(own, run.values)
        assert bool((slots.view(bits)[t.n1:] == sent).all())
    assert len(starts) == 3


def _launch_metas(monkeypatch) -> list:
    """The constexprs of every _syncfree launch from here on (t3.syncfree_launch's), in a list."""
    launch, seen = t3.syncfree_launch, []

    def spy(*a, **k):
        args, meta = launch(*a, **k)
        seen.append(meta)
        return args, meta
    monkeypatch.setattr(t3, "syncfree_launch", spy)
    return seen


@settings(max_examples=40, deadline=None)
@given(widths=st.lists(st.integers(1, 8), min_size=1, max_size=30), R=st.sampled_from([8, 16]))
def test_padded_blocks_hold_each_blocks_rows(widths, R):
    """BLK_PAD's table (padded_blocks): block t's rows, in order, at [t·R, t·R + R), −1 after them."""
    ptr = np.concatenate([[0], np.cumsum(widths)])
    seq = np.random.default_rng(len(widths)).permutation(ptr[-1]).astype(np.int32)
    pad = t3.padded_blocks(ptr, seq, R).reshape(len(widths), R)
    for t, w in enumerate(widths):
        assert (pad[t, :w] == seq[ptr[t]:ptr[t + 1]]).all() and (pad[t, w:] == -1).all()


@pytest.mark.parametrize("rec, steps", [(False, False), (True, False), (True, True)])
def test_blocks_of_several_held_rows_read_the_padded_table(rec, steps, monkeypatch):
    """The dataflow executor's blocks of several held rows read their rows from BLK_PAD (one
    dependent load fewer than BLK_PTR, then BLK_ITER), or with BLK_REC records that also hold each
    row's kind, entries' span and held length (block_records), and with STEP_REC each held row's
    steps' tables too (step_records, here in pieces of a few blocks), built by prepare from its own
    blocks, and give t0's factor and solve."""
    monkeypatch.setattr(t3, "BLK_REC", rec)
    monkeypatch.setattr(t3, "STEP_REC", steps)
    monkeypatch.setattr(sd, "PIECE", 64)             # every long pass in many pieces, on threads
    pair = "spilu0_sptrsv"
    mats = operands(pair, _hub_walks(261, 5))
    seen = _launch_metas(monkeypatch)
    run = _walked_dataflow_is_t0s(pair, mats, False, 17, "hub_walks_alone", block_rows=4)
    dev = run.plan[1]
    ptr, seq = (dev[k].cpu().numpy() for k in ("blk_ptr", "blk_iter"))
    assert (np.diff(ptr) > 1).any()
    pad = t3.padded_blocks(ptr, seq, 4)
    t = run.tables
    want = t3.block_records(t, pad, 4) if rec else pad
    assert (dev["blk_pad"].cpu().numpy() == want).all()
    assert seen and all(meta.get("BLK_PAD") is dev["blk_pad"] and meta["BLK_REC"] == rec for meta in seen)
    assert all((meta.get("STEP_REC") is not None) == steps for meta in seen) and ("step_rec" in dev) == steps
    if steps:    # lane r's step s: its row's entry e = ENT_PTR[v] + s, if a factor row's, else 0
        S = t.held(4)[1]
        got = dev["step_rec"].cpu().numpy().reshape(-1, 4, 4, S)
        assert got.shape[0] == len(pad) // 4
        u0 = np.asarray(t.upd_ptr)[t.ent_val[:t.ent_ptr[t.n1]]]
        for b, r in zip(*np.nonzero(pad.reshape(-1, 4) >= 0)):
            v = pad[4 * b + r]
            for q in range(S):
                e = t.ent_ptr[v] + q
                inside = v < t.n1 and e < t.ent_ptr[v + 1]
                four = (t.ent_val[e], t.ent_aux[e], u0[e], t.step_bits[e]) if inside else (0,) * 4
                assert tuple(got[b, :, r, q]) == tuple(np.int64(w).astype(np.uint32).view(np.int32) for w in four)
    if rec:      # each lane's record is its row's: kind, ENT_PTR[v], ENT_PTR[v + 1], HOLD_LEN[v] (0 past the factor)
        v, kind, first, last, held = want.reshape(-1, 5, 4).transpose(1, 0, 2).reshape(5, -1)
        r = v[v >= 0]
        assert (kind[v >= 0] == t.kind[r]).all() and (first[v >= 0] == t.ent_ptr[r]).all()
        assert (last[v >= 0] == t.ent_ptr[r + 1]).all() and held[v >= 0].any()
        assert (held[v >= 0] == np.where(r < len(t.hold_len), t.hold_len[np.minimum(r, len(t.hold_len) - 1)], 0)).all()


@pytest.mark.parametrize("steps, fused", [(True, False), (False, True), (True, True)])
@pytest.mark.parametrize("fuse", [False, True])
@pytest.mark.parametrize("pair", sd.FACTOR_PAIRS)
def test_step_records_give_t0s(pair, fuse, steps, fused, monkeypatch):
    """With STEP_REC the held rows of a power-law graph (a grid of pairs; the IC(0)'s read across,
    steps first) read their steps' tables from the blocks' step records, and with FUSE_REC a fused
    row its base and its solve row's tables from the blocks' fused records (fused_records), and
    give t0's factor and solve, rows fused with their solve rows or apart."""
    monkeypatch.setattr(t3, "STEP_REC", steps)
    monkeypatch.setattr(t3, "FUSE_REC", fused)
    mats = operands(pair, matrix("powerlaw_laplacian", 120, 3))
    t = rows.row_tables(pair, *mats)
    assert rows.grid_layout(t.held_shape) and rows.reads_across(t.held_shape, t.factor) == (pair == "spic0_sptrsv")
    seen = _launch_metas(monkeypatch)
    b = np.random.default_rng(4).standard_normal(mats[0].shape[0])
    v = _vector(b, "float64")
    run = t3.prepare(pair, *mats, like=v, schedule=fs.inspect(pair, *mats, kind="sparse_fusion"), executor="dataflow",
                     fuse_rows=fuse, lean=False, block_rows=4)
    _check(run(v), _reference(pair, mats, b, "float64", ("step_rec", pair)), pair, mats, "float64", f"fuse={fuse}")
    dev = run.plan[1]
    assert seen and all((meta.get("STEP_REC") is dev.get("step_rec")) and ("step_rec" in dev) == steps
                        for meta in seen)
    with_fused = fused and run.plan[2] > 0
    assert all((meta.get("FUSE_REC") is not None) == with_fused for meta in seen)
    assert not fuse or pair != "spic0_sptrsv" or run.plan[2] > 0     # the IC(0)'s rows do fuse here
    if with_fused:    # lane r's factor row v: FAC_PTR[v], v2 = fuse[v], and v2's RHS, DIAG, DST
        t = run.tables
        pad = t3.padded_blocks(*(dev[k].cpu().numpy() for k in ("blk_ptr", "blk_iter")), 4)
        rec = dev["fuse_rec"].cpu().numpy().reshape(-1, 5, 4).transpose(1, 0, 2).reshape(5, -1)
        fuse_of = dev["fuse"].cpu().numpy()
        fac = (pad >= 0) & (pad < t.n1)
        r, v2 = pad[fac], rec[1][fac]
        assert (rec[0][fac] == t.fac_ptr[r]).all() and (v2 == fuse_of[r]).all() and (v2 >= 0).any()
        two = v2 >= 0
        assert (rec[2][fac][two] == t.rhs[v2[two]]).all() and (rec[3][fac][two] == t.diag[v2[two]]).all()
        assert (rec[4][fac][two] == t.dst[v2[two]]).all() and (rec[1][~fac] == -1).all()


@pytest.mark.parametrize("fuse", [False, True])
@pytest.mark.parametrize("pair", sd.FACTOR_PAIRS)
def test_long_walked_rows(pair, fuse):
    """A walked row copies its finished entries to VAL in trips of CHUNK (factor_rows' DATA mode),
    a hub's row in hundreds of them (tried wider, 2026-12-06: slower); rows of 261 entries (for
    ILU(0), rows whose late entries every later row waits on) still give t0's factor and solve on
    the dataflow executor, rows fused with their solve rows or apart."""
    n = 261
    mats = operands(pair, _long_walks(pair, n, 3))
    t = rows.row_tables(pair, *mats)
    assert t.walks and (np.diff(t.fac_ptr)[t.walked] == n).any()
    _walked_dataflow_is_t0s(pair, mats, fuse, 12, "long_walks")


@pytest.mark.parametrize("executor", ["syncfree", "dataflow"])
def test_held_work_bound(executor, monkeypatch):
    """Rows whose held steps would go through more than HELD_WORK values (S · C · W) walk in memory
    instead, in blocks still capped by the flag executor's step work, and give t0's factor; the
    dataflow executor then polls every operand it reads of another row from memory."""
    A = matrix("poisson3d_27", 27, 3)
    W, S, C = rows.row_tables("spic0_sptrsv", A).held_shape
    assert S * C * W <= rows.HELD_WORK
    monkeypatch.setattr(rows, "HELD_WORK", S * C * W - 1)
    monkeypatch.setattr(rows, "_PATTERNS", {})          # no tables cached under the old bound
    tables = rows.row_tables("spic0_sptrsv", A)
    assert tables.held_shape == (0, 0, 0) and tables.held(1) == (0, 0, 0)
    b = np.random.default_rng(5).standard_normal(A.shape[0])
    v = _vector(b, "float64")
    run = t3.prepare("spic0_sptrsv", A, like=v, executor=executor)
    assert run.tables.held(run.block_rows) == (0, 0, 0)
    assert run.block_rows == t3.factor_block_rows(run.tables) < t3.FACTOR_BLOCK_ROWS   # the step-work cap still holds
    out = run(v)
    _check(out, _reference("spic0_sptrsv", (A,), b, "float64", ("held_work", 27)), "spic0_sptrsv", (A,), "float64",
           "walked rows past HELD_WORK")


@pytest.mark.parametrize("pair", sd.FACTOR_PAIRS)
@pytest.mark.parametrize("runner", ["t2", "levels", "syncfree"])
def test_held_rows_match_the_walk_and_t0(pair, runner, monkeypatch):
    """Held rows (factor steps on registers, one store) and the memory walk give t0's factor and
    solve on the 27-point stencil (13 steps of up to 13 pairs; IC's diagonal step reads the row's
    own entries) and on a power-law graph (uneven rows), with the held path really taken. t3 runs
    4 warps for 2 lanes, so every entry is held by many threads of different warps: on a GPU this
    is where a read-then-overwrite without a barrier between them raced (factor_rows)."""
    budget_held = rows.HELD_BUDGET
    for gen, size in (("poisson3d_27", 27), ("powerlaw_laplacian", 30)):
        monkeypatch.setattr(rows, "HELD_BUDGET", budget_held)
        mats = operands(pair, matrix(gen, size, 3))
        b = np.random.default_rng(7).standard_normal(mats[0].shape[0])
        ref = _reference(pair, mats, b, "float64", ("held", pair, gen))
        tables = rows.row_tables(pair, *mats)
        assert tables.held(1) != (0, 0, 0)
        for budget in (budget_held, 0):
            monkeypatch.setattr(rows, "HELD_BUDGET", budget)
            v = _vector(b, "float64")
            if runner == "t2":
                out = t2.prepare(pair, *mats, like=v)(v)
            else:
                out = t3.prepare(pair, *mats, like=v, schedule=_schedule_of(pair, mats, gen), executor=runner,
                                 block_rows=2, num_warps=4)(v)
            _check(out, ref, pair, mats, "float64", f"{runner} {gen} budget={budget}")


_HELD_SCHEDULES: dict = {}


def _schedule_of(pair, mats, gen):
    if (pair, gen) not in _HELD_SCHEDULES:
        _HELD_SCHEDULES[pair, gen] = fs.inspect(pair, *mats, kind="wavefront")
    return _HELD_SCHEDULES[pair, gen]


def test_factor_pairs_take_small_flag_blocks():
    """The flag executor's R on a factor pair is decided from its rows (factor_block_rows): at
    most FACTOR_BLOCK_ROWS, fewer where a held step's one-hot work R · C · W would pass
    FACTOR_STEP_WORK (27-point rows: 1), FACTOR_BLOCK_ROWS for rows that walk; the other pairs
    take BLOCK_ROWS; prepare follows it, and the benchmark records what prepare took."""
    from tiers.bench.sparse_fusion import runner
    assert t3.tuning_defaults("syncfree", "spilu0_sptrsv")["block_rows"] is None
    assert t3.tuning_defaults("syncfree", "sptrsv_spmv")["block_rows"] == t3.BLOCK_ROWS["syncfree"]
    assert t3.tuning_defaults("syncfree")["block_rows"] == t3.BLOCK_ROWS["syncfree"]
    like = _vector(np.ones(16), "float64")
    assert t3.prepare("spic0_sptrsv", sm.poisson2d(4), like=like, executor="syncfree").block_rows == 4
    t27 = sm.poisson3d(3, points=27)
    W, S, C = rows.row_tables("spilu0_sptrsv", t27).held_shape
    assert C * W > t3.FACTOR_STEP_WORK // 2 and t3.factor_block_rows(rows.row_tables("spilu0_sptrsv", t27)) == 1
    like27 = _vector(np.ones(27), "float64")
    for pair in sd.FACTOR_PAIRS:
        assert t3.prepare(pair, t27, like=like27, executor="syncfree").block_rows == 1
    assert t3.factor_block_rows(rows.row_tables("spilu0_sptrsv", sm.poisson3d(4))) == 4     # 7-point rows
    assert t3.prepare("spilu0_sptrsv", t27, like=like27, executor="syncfree", block_rows=4).block_rows == 4
    n = rows.HELD_WIDTH + 8                            # rows wider than HELD_WIDTH walk: FACTOR_BLOCK_ROWS
    A = _arrow_first(n)
    assert t3.factor_block_rows(rows.row_tables("spilu0_sptrsv", A)) == t3.FACTOR_BLOCK_ROWS
    fn = registry.get("sparse_fusion", "t3_triton_fused", "spilu0_sptrsv")
    row, _ = runner(fn, "spilu0_sptrsv", [t27], like27, None, "syncfree", {"block_rows": None, "tickets": "dag"})
    assert row["block_rows"] == 1 and row["timed"] == "prepared"


@pytest.mark.parametrize("pair", sd.FACTOR_PAIRS)
def test_dataflow_factor_blocks_widen_on_wide_levels(pair, monkeypatch):
    """The dataflow executor takes WIDE_FACTOR_BLOCK_ROWS for a factor pair whose joint DAG's
    levels hold at least WIDE_LEVELS iterations on average (_wide), FACTOR_BLOCK_ROWS otherwise;
    the flag executor keeps FACTOR_BLOCK_ROWS; the step-work cap holds either way (27-point: 1)."""
    A = sm.poisson3d(4)
    like = _vector(np.ones(A.shape[0]), "float64")
    s = fs.inspect(pair, A, kind="wavefront")
    for bound, want in ((1, t3.WIDE_FACTOR_BLOCK_ROWS), (1 << 40, t3.FACTOR_BLOCK_ROWS)):
        monkeypatch.setattr(t3, "WIDE_LEVELS", bound)
        assert t3._wide(s, (A,)) == (bound == 1)
        assert t3.prepare(pair, A, like=like, schedule=s, executor="dataflow", lean=False).block_rows == want
        assert t3.prepare(pair, A, like=like, schedule=s, executor="syncfree").block_rows == t3.FACTOR_BLOCK_ROWS
    monkeypatch.setattr(t3, "WIDE_LEVELS", 1)
    t27 = sm.poisson3d(3, points=27)
    assert t3.prepare(pair, t27, like=_vector(np.ones(27), "float64"), executor="dataflow").block_rows == 1


# ---------------------------------------------------------------- fused rows (the flag executor on the factor pairs)

def _merged_reps(fuse):
    rep = np.arange(len(fuse))
    heads = np.flatnonzero(fuse >= 0)
    rep[fuse[heads]] = heads
    return rep


def test_fused_rows_follow_the_schedule():
    """Solve row i rides with factor row i exactly where the schedule puts both in one partition:
    the sparse-fusion inspector does so for nearly every row (interleaved packing), a wavefront
    schedule never can (solve row i lies a level below factor row i); the vector pairs fuse
    nothing."""
    A = sm.poisson2d(12)
    for pair in sd.FACTOR_PAIRS:
        mats = operands(pair, A)
        for kind in fs.KINDS:
            s = fs.inspect(pair, *mats, kind=kind, workers=4)
            fuse = t3.fused_rows(s, mats)
            n1 = s.n1
            part = np.empty(2 * n1, dtype=np.int64)
            part[s.order] = np.repeat(np.arange(s.partitions()), np.diff(s.part_ptr))
            i = np.arange(n1)
            assert (fuse[n1:] == -1).all()
            assert ((fuse[:n1] >= 0) == (part[i] == part[n1 + i])).all()
            assert (fuse[:n1][fuse[:n1] >= 0] == n1 + i[fuse[:n1] >= 0]).all()
            if kind == "wavefront":
                assert (fuse == -1).all()
            if kind == "sparse_fusion":
                assert (fuse >= 0).sum() >= 0.9 * n1
    mats = operands("spmv_sptrsv", A)
    assert t3.fused_rows(fs.inspect("spmv_sptrsv", *mats, kind="sparse_fusion"), mats) is None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen=st.sampled_from(tuple(sm.GENERATORS)), size=st.integers(1, 150), seed=st.integers(0, 1000),
       pair=st.sampled_from(sd.FACTOR_PAIRS), kind=st.sampled_from(fs.KINDS), workers=st.integers(1, 9),
       R=st.sampled_from([1, 2, 3, 16]), tickets=st.sampled_from(("dag", "alap", "mid")))
def test_fused_ticket_order_never_waits_on_itself_or_the_future(gen, size, seed, pair, kind, workers, R, tickets):
    """With fused rows the blocks list every iteration but the fused solve rows exactly once, in
    blocks of at most R; every dependence of the joint DAG, with each fused solve row standing
    for its factor row, points from a lower ticket to a higher one — except factor row i → solve
    row i, which the same lane runs in order — and each block lists exactly the blocks it needs.
    (The schedule's own (level, step) tickets cannot take merged rows: test_fuse_rows_option.)"""
    mats = operands(pair, matrix(gen, size, seed))
    s = fs.inspect(pair, *mats, kind=kind, workers=workers)
    fuse = t3.fused_rows(s, mats)
    blk_ptr, seq, dep_ptr, dep_blk = t3.ticket_blocks(s, mats, R, tickets, fuse_rows=True)
    n = s.n1 + s.n2
    rep = _merged_reps(fuse)
    assert sorted(seq.tolist()) == np.flatnonzero(rep == np.arange(n)).tolist()
    sizes = np.diff(blk_ptr)
    assert blk_ptr[0] == 0 and blk_ptr[-1] == len(seq) and sizes.max(initial=1) <= R and sizes.min(initial=1) >= 1
    block_of = np.empty(n, dtype=np.int64)
    block_of[seq] = np.repeat(np.arange(len(sizes)), sizes)
    block_of = block_of[rep]
    u, v = sd.joint_dag(pair, *mats).sources()
    inside = rep[u] == rep[v]
    assert (fuse[u[inside]] == v[inside]).all()
    assert (block_of[u[~inside]] < block_of[v[~inside]]).all()
    want = [set() for _ in sizes]
    for a, b in zip(block_of[u[~inside]].tolist(), block_of[v[~inside]].tolist()):
        want[b].add(a)
    assert [sorted(w) for w in want] == [dep_blk[dep_ptr[t]:dep_ptr[t + 1]].tolist() for t in range(len(sizes))]


def test_a_ticket_order_that_waits_on_the_future_is_refused(monkeypatch):
    """ticket_blocks checks the property every sync-free launch rests on instead of trusting its
    keys: with keys that put a row before what it reads, it raises rather than build a plan that
    would hang."""
    A = sm.poisson2d(5)
    mats = operands("spilu0_sptrsv", A)
    s = fs.inspect("spilu0_sptrsv", *mats, kind="wavefront")
    dag, level = t3._joint(s, mats)
    s.cache[fs.JOINT_LEVELS] = level.max() - level             # reversed: every dependence points to the future
    with pytest.raises(AssertionError, match="a block would wait for itself or a later block"):
        t3.ticket_blocks(s, mats, 4, "dag")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pair", sd.FACTOR_PAIRS)
@pytest.mark.parametrize("rows_as", ["held", "walked"])
def test_fused_rows_match_t0(pair, rows_as, dtype, monkeypatch):
    """The flag executor under the sparse-fusion schedule runs each solve row inside its factor
    row's block — from the registers the held row ends in, or after the walk in memory — and
    gives t0's factor and solve, with half the blocks; fuse_rows=False runs them apart and gives
    the same. 27-point rows (IC: the divisor read from the held row) and a band too wide to hold."""
    A = sm.poisson3d(3, points=27) if rows_as == "held" else sm.banded_spd(30, 12, seed=2)
    mats = operands(pair, A)
    b = np.random.default_rng(_seed(pair, rows_as)).standard_normal(A.shape[0])
    s = fs.inspect(pair, *mats, kind="sparse_fusion")
    like = _vector(b, dtype)
    if rows_as == "walked":
        monkeypatch.setattr(rows, "HELD_BUDGET", 0)
    ref = _reference(pair, mats, b, dtype, ("fused", pair, rows_as, dtype))
    fused = t3.prepare(pair, *mats, like=like, schedule=s, executor="syncfree")
    assert (fused.tables.held(fused.block_rows)[0] > 0) == (rows_as == "held")
    apart = t3.prepare(pair, *mats, like=like, schedule=s, executor="syncfree", fuse_rows=False)
    assert fused.fuse_rows and fused.fused == (t3.fused_rows(s, mats) >= 0).sum() >= A.shape[0] // 2
    assert not apart.fuse_rows and apart.fused == 0 and fused.plan[0] < apart.plan[0]
    for run, what in ((fused, "fused"), (apart, "apart")):
        _check(run(like), ref, pair, mats, dtype, f"{what} {rows_as} rows")


def test_fuse_rows_option():
    """fuse_rows takes True, False or None (FUSE_ROWS); the executors without fused rows ignore it,
    and so does the flag executor with tickets="schedule", whose (level, step) groups a merged row
    would straddle: ticket_blocks refuses that pairing. Under LBC some solve rows share their
    factor row's partition and some do not; merged by step, the first of them put a row before one
    it reads."""
    A = sm.poisson2d(4)
    like = _vector(np.ones(16), "float64")
    with pytest.raises(ValueError, match="fuse_rows must be True, False or None, got 1"):
        t3.prepare("spilu0_sptrsv", A, like=like, executor="syncfree", fuse_rows=1)
    s = fs.inspect("spilu0_sptrsv", A, kind="sparse_fusion")
    assert t3.prepare("spilu0_sptrsv", A, like=like, schedule=s, executor="syncfree").fuse_rows is t3.FUSE_ROWS
    assert t3.prepare("spilu0_sptrsv", A, like=like, schedule=s, executor="levels", fuse_rows=True).fused == 0
    by_step = t3.prepare("spilu0_sptrsv", A, like=like, schedule=s, executor="syncfree", tickets="schedule")
    assert by_step.fuse_rows and by_step.fused == 0
    with pytest.raises(ValueError, match="fused rows take their tickets from the merged DAG's levels"):
        t3.ticket_blocks(s, (A,), 4, "schedule", fuse_rows=True)
    mats, b = _problem("spilu0_sptrsv")
    lbc = _schedule("spilu0_sptrsv", mats, "lbc")
    assert 0 < (t3.fused_rows(lbc, mats) >= 0).sum() < lbc.n1       # partly fused: what tripped "schedule"
    run = t3.prepare("spilu0_sptrsv", *mats, like=_vector(b, "float64"), schedule=lbc, executor="syncfree",
                     tickets="schedule")
    _check(run(_vector(b, "float64")), _reference("spilu0_sptrsv", mats, b, "float64", ("spilu0_sptrsv", "float64")),
           "spilu0_sptrsv", mats, "float64", "LBC, tickets by the schedule's steps")


def _flat_leaves(dev, n, W, R):
    """Per lane slot of a flat plan (flat_plan) that is a row's own (its place in row order ≥ 0):
    the (VEC position, value index, sign) it sums, its pieces expanded (a piece is a lane with no
    place in row order, read as an entry of coefficient 1), and per block its rows."""
    px, pv = (dev[k].cpu().numpy().reshape(-1, W) for k in ("px", "pv"))
    sign, seg = (dev[k].cpu().numpy().reshape(-1, W).astype(np.int64) for k in ("sign", "seg"))
    dst = dev["dst"].cpu().numpy()
    items = {}
    for t in range(px.shape[0]):
        for k in range(W):
            if px[t, k] >= 0 or pv[t, k] != -1 or seg[t, k] & 1:
                items.setdefault(t * R + (seg[t, k] >> 2), []).append((px[t, k], pv[t, k], sign[t, k]))

    def leaves(slot):
        out = []
        for p, v, s in items[slot]:
            if p == -1 and v == -1:
                continue                                  # an empty row's one slot
            if v == -2 and p >= n and dst[p - n] < 0:
                out += leaves(p - n)                      # a piece's result
            else:
                out.append((p, v, s))
        return out
    return {slot: sorted(leaves(slot)) for slot in items if dst[slot] >= 0}, items


@pytest.mark.parametrize("width,R", [(4, 1), (32, 8)])
def test_flat_records(width, R, monkeypatch):
    """flat_plan and _flat (FLAT_RECORDS): where some row is longer than CHUNK, striding dataflow
    programs read flat records. A block holds at most R rows and `width` entry slots; every
    position it reads is the input or a slot of an earlier block; each row sums exactly its own
    entries, signed, and its right-hand side, through pieces where it is longer than `width`
    (4: trees of several generations); the results are t0's. Where the
    programs take tickets, or FLAT_RECORDS is off, the records of _dataflow_plan are read."""
    monkeypatch.setattr(t3, "FLAT_WIDTH", width)
    A = sm.powerlaw_laplacian(300, m=2, seed=3)          # hub rows of more than 32 entries
    for pair, mats, b, ref in _vector_pair_cases((A,), 7, "flat"):
        run = t3.prepare(pair, *mats, like=_vector(b, "float64"), executor="dataflow", block_rows=R)
        assert run.flat and run.record_shape["TAIL"] and run.split and not run.early
        count, dev = run.plan
        n, tables = run.tables.n1, run.tables
        rows_of, items = _flat_leaves(dev, n, width, R)
        px = dev["px"].cpu().numpy().reshape(count, width)
        read = px >= n
        assert ((px[read] - n) // R < np.nonzero(read)[0]).all(), f"{pair}: a block reads a later one"
        seg = dev["seg"].cpu().numpy().reshape(count, width).astype(np.int64)
        last = (seg & 1) == 1
        assert (seg >> 2 < R).all() and (last.sum(1) <= R).all()
        assert all(len(np.unique((seg[t] >> 2)[last[t]])) == last[t].sum() for t in range(count))
        where = np.r_[np.arange(n), dev["back"].cpu().numpy()]          # VEC position → slot layout
        slot_of = where[tables.dst] - n
        for i in range(len(tables.dst)):
            e = np.arange(tables.ent_ptr[i], tables.ent_ptr[i + 1])
            own = [(where[a], v, tables.sign[i]) for a, v in zip(tables.ent_aux[e], tables.ent_val[e])]
            if tables.rhs[i] >= 0:
                own.append((where[tables.rhs[i]], -2, 1))
            assert rows_of[slot_of[i]] == sorted(own), f"{pair}: row {i} does not sum its own entries"
        cut = len(items) - len(rows_of)
        assert (cut > 0) is (int((np.diff(tables.ent_ptr) + (tables.rhs >= 0)).max()) > width)
        _check(run(_vector(b, "float64")), ref, pair, mats, "float64", f"flat W={width} R={R} {pair}")
        assert not t3.prepare(pair, *mats, like=_vector(b, "float64"), executor="dataflow", claim="counter").flat
    big = t3.prepare(pair, *mats, like=_vector(b, "float64"), executor="dataflow", block_rows=128)
    assert big.flat and big.block_rows == min(width, 32)        # a block holds at most W rows
    _check(big(_vector(b, "float64")), ref, pair, mats, "float64", f"flat W={width} R=128 {pair}")
    monkeypatch.setattr(t3, "FLAT_RECORDS", False)
    assert not t3.prepare(pair, *mats, like=_vector(b, "float64"), executor="dataflow").flat


@settings(max_examples=40, deadline=None)
@given(V=st.integers(0, 300), groups=st.integers(1, 20), W=st.sampled_from([1, 2, 4, 8, 32]),
       R=st.sampled_from([1, 2, 4, 8]), seed=st.integers(0, 2**16))
def test_flat_packing_is_the_greedy_cut(V, groups, W, R, seed):
    """flat._pack follows the greedy cut from block start to block start; it must give what the
    row-by-row greedy gives: a new block where the key changes, or R rows or W entries are full
    (a row of more than W entries alone in its block)."""
    rng = np.random.default_rng(seed)
    key = rng.integers(0, groups, V)
    cnt = rng.integers(1, W + 3, V)
    order = np.lexsort((np.arange(V), key))
    blk, lane, off = t3_flat._pack(key, cnt, order, R, W)
    b, j, o, last = -1, R, W, None
    for v in order.tolist():
        if key[v] != last or j == R or o + cnt[v] > W:
            b, j, o, last = b + 1, 0, 0, key[v]
        assert (blk[v], lane[v], off[v]) == (b, j, o), v
        j, o = j + 1, o + int(cnt[v])


def test_flat_records_of_empty_rows():
    """A row with no entry and no right-hand side (an empty row of sptrsv_spmv's A) still takes one
    slot of a flat record and stores its 0: without it y_i would keep the sentinel (NaN). Only the
    SpMV's rows, which no row reads, so that a missing store shows as NaN, not as a wait."""
    A = sm.powerlaw_laplacian(300, m=2, seed=3).tocsr()
    E = A.tolil()
    E[[5, 77, 200], :] = 0
    E = sp.csr_matrix(E)
    E.eliminate_zeros()
    mats = (sp.tril(A, format="csr"), E)
    b = np.random.default_rng(4).standard_normal(300)
    run = t3.prepare("sptrsv_spmv", *mats, like=_vector(b, "float64"), executor="dataflow")
    items = np.diff(run.tables.ent_ptr) + (run.tables.rhs >= 0)
    assert run.flat and (items == 0).sum() == 3
    _check(run(_vector(b, "float64")), _reference("sptrsv_spmv", mats, b, "float64", ("empty rows", 300)),
           "sptrsv_spmv", mats, "float64", "flat records, empty rows")


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(n=st.integers(100, 180), m=st.integers(5, 6), seed=st.integers(0, 2**16), width=st.sampled_from([2, 4, 8, 32]),
       R=st.sampled_from([1, 2, 4, 8]), pair=st.sampled_from(["sptrsv_spmv", "spmv_sptrsv", "sptrsv_sptrsv"]),
       kind=st.sampled_from(["wavefront", "lbc", "sparse_fusion"]))
def test_flat_records_property(n, m, seed, width, R, pair, kind):
    """Flat records give t0's results on random power-law graphs where one of the pair's rows is
    longer than the records of _dataflow_plan (RECORD_CHUNK), whatever the width, rows per block
    and schedule."""
    A = sm.powerlaw_laplacian(n, m=m, seed=seed)
    mats = operands(pair, A)
    assume(rows.row_tables(pair, *mats).longest > t3_records.RECORD_CHUNK)     # the pair's own rows, not A's
    b = np.random.default_rng(seed).standard_normal(n)
    old = t3.FLAT_WIDTH
    t3.FLAT_WIDTH = width
    try:
        run = t3.prepare(pair, *mats, like=_vector(b, "float64"), executor="dataflow", block_rows=R,
                         schedule=fs.inspect(pair, *mats, kind=kind))
        out = run(_vector(b, "float64"))
    finally:
        t3.FLAT_WIDTH = old
    assert run.flat
    _check(out, registry.get("sparse_fusion", "t0_numpy", pair)(*mats, b), pair, mats, "float64",
           f"flat n={n} m={m} seed={seed} W={width} R={R} {pair} {kind}")


# ---------------------------------------------------------------- held_steps on a grid, against its formulas

@triton.jit
def _grid_steps_kernel(W_IN, EXT, PIV, PM, W_OUT, lo, hi, FACTOR: tl.constexpr, R: tl.constexpr, W: tl.constexpr,
                       S: tl.constexpr, C: tl.constexpr, RECIP: tl.constexpr, ACROSS: tl.constexpr):
    """held_steps on one block of rows: w [R, W], the grid (ACROSS: [R, W, S], else [R, S, W]),
    pivots and live steps [R, S] from memory; w after steps lo ≤ s < hi to W_OUT."""
    r = tl.arange(0, R)
    cols = tl.arange(0, W)
    step = tl.arange(0, S)
    w = tl.load(W_IN + r[:, None] * W + cols[None, :])
    if ACROSS:
        ext = tl.load(EXT + (r[:, None, None] * W + cols[None, :, None]) * S + step[None, None, :])
    else:
        ext = tl.load(EXT + (r[:, None, None] * S + step[None, :, None]) * W + cols[None, None, :])
    piv = tl.load(PIV + r[:, None] * S + step[None, :])
    pm = tl.load(PM + r[:, None] * S + step[None, :]) != 0
    loc = tl.zeros([R, S], tl.int32)
    w = rows.held_steps(w, ext, piv, pm, loc, loc, lo, hi, FACTOR, W, S, C, RECIP, False)
    tl.store(W_OUT + r[:, None] * W + cols[None, :], w)


def _grid_steps_reference(w, b, piv, pm, lo, hi, factor, recip):
    """The steps of held_finish's docstring, row by row, step by step (float64): ILU l = w[s] /
    pivot, w[j] −= l·b[s, j]; IC w[s] = (w[s] − Σ_{j<s} w[j]·b[s, j]) / pivot; b[s, s] = 0."""
    w = w.copy()
    for r in range(w.shape[0]):
        for s in range(lo, hi):
            if not pm[r, s]:
                continue
            p = 1.0 / piv[r, s] if recip else piv[r, s]
            if factor == rows.ILU:
                lik = w[r, s] / p
                w[r] -= lik * b[r, s]
                w[r, s] = lik
            else:
                w[r, s] = (w[r, s] - w[r, :s] @ b[r, s, :s]) / p
    return w


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), factor=st.sampled_from([rows.ILU, rows.IC]), R=st.sampled_from([1, 2]),
       S=st.sampled_from([4, 8, 16]), seed=st.integers(0, 2**31 - 1))
def test_grid_steps_match_their_formulas(data, factor, R, S, seed):
    """held_steps' unrolled grid steps (ILU(0): w[s] sent to every lane; IC(0) right-looking, the
    grid read across) give the left-looking formulas' values for any steps live within lo ≤ s < hi
    — a second stage's call (lo > 0) included, whose earlier entries are done — with the pivots'
    reciprocals (the dataflow executor) or, for ILU(0), the pivots (the flag executor)."""
    rng = np.random.default_rng(seed)
    W = S if factor == rows.IC else data.draw(st.sampled_from([S, 2 * S]), label="W")
    C = 2 * rows.GRID_WORK // (S * W) + 1               # a grid whatever S and W: S · C · W > GRID_WORK
    recip = True if factor == rows.IC else data.draw(st.booleans(), label="recip")
    lo = data.draw(st.integers(0, S - 1), label="lo")
    hi = data.draw(st.integers(lo, S), label="hi")
    pm = np.zeros((R, S), bool)
    pm[:, lo:hi] = rng.random((R, hi - lo)) < 0.8      # every live step inside the call's range
    w = rng.standard_normal((R, W))
    b = rng.standard_normal((R, S, W)) * 0.3
    b[:, np.arange(S), np.arange(S)] = 0.0               # a step's own entry pairs with nothing
    if factor == rows.IC:
        b = np.tril(b, -1)                               # IC: b[s, j] for the entries j < s only
    piv = rng.uniform(1.0, 2.0, (R, S))
    ref = _grid_steps_reference(w, b, 1.0 / piv if recip else piv, pm, lo, hi, factor, recip)
    across = factor == rows.IC
    t = lambda x: torch.tensor(np.ascontiguousarray(x), device=DEVICE)
    out = torch.full((R, W), float("nan"), dtype=torch.float64, device=DEVICE)     # poisoned: every entry written
    _grid_steps_kernel[(1,)](t(w), t(b.transpose(0, 2, 1) if across else b), t(1.0 / piv if recip else piv),
                             t(pm.astype(np.int8)), out, lo, hi, FACTOR=factor, R=R, W=W, S=S, C=C, RECIP=recip,
                             ACROSS=across, num_warps=1)
    assert_close(out.cpu(), ref, "float64", f"held_steps factor={factor} R={R} S={S} W={W} lo={lo} hi={hi}")


@pytest.mark.parametrize("name,pair,staged,across", HELD_GRID_CASES)
def test_grid_steps_paths(name, pair, staged, across):
    """Which form of held steps each factor case takes, so that the t0 checks of the cases above
    (test_staged_steps_rule_and_t0) run every one: every case a grid, ILU(0)'s steps unrolled, the
    27-point grid's IC(0) right-looking, the grid read across (rows.reads_across), the 2D grid's
    IC(0) in one pass (its steps apart). The kernels decide it from W, S, C (and APART,
    held_in_one_pass) by these same rules (rows._grid, rows._across)."""
    mats = operands(pair, matrix(name, {"poisson2d": 36, "poisson3d_27": 27}.get(name, 64), 2))
    v = _vector(np.random.default_rng(_seed("paths", name, pair)).standard_normal(mats[0].shape[0]), "float64")
    run = t3.prepare(pair, *mats, like=v, executor="dataflow")
    shape = run.tables.held(run.block_rows)
    apart = t3.held_in_one_pass(run.tables, shape[0])
    factor = run.tables.factor
    assert rows.grid_layout(shape), shape
    assert rows.reads_across(shape, factor, apart) == across, (shape, apart)
    assert apart == (name == "poisson2d"), shape


# ---------------------------------------------------------------- the lean rows (updates only on diagonals)

def test_lean_rows_premise():
    """RowTables.updates_only_diagonal: the 5- and 7-point grids (every update lands on a
    diagonal), for both factors, in any order — an update of (i, j) through row k needs i, j, k
    pairwise adjacent, and a grid's graph holds no triangle; not the 27-point grid, a band or a
    power-law graph, nor any vector pair."""
    for A, want in ((sm.poisson2d(7), True), (sm.poisson3d(5), True), (sm.poisson3d(4, points=27), False),
                    (sm.banded_spd(40, 3), False), (sm.powerlaw_laplacian(60, 3, 1), False)):
        for pair in sd.FACTOR_PAIRS:
            assert rows.row_tables(pair, A).updates_only_diagonal is want, (pair, A.shape)
    assert not rows.row_tables("sptrsv_spmv", sm.tril_csr(sm.poisson2d(5)), sm.poisson2d(5)).updates_only_diagonal
    P = np.random.default_rng(3).permutation(49)
    shuffled = sd.csr(sm.poisson2d(7)[P][:, P])
    for pair in sd.FACTOR_PAIRS:
        assert rows.row_tables(pair, shuffled).updates_only_diagonal
    # a graph replay puts the sentinel back in every entry a step rewrites (rows.factor_out), which
    # the lean rows must then write again on every call: they write each row's lower entries and pivot
    for A in (sm.poisson2d(7), sm.poisson3d(5), shuffled):
        for pair in sd.FACTOR_PAIRS:
            t = rows.row_tables(pair, A)
            indptr, indices = (np.asarray(a) for a in t.factor_pattern)
            written = np.flatnonzero(indices <= sd.row_ids(indptr))
            assert np.isin(t.rewritten, written).all(), (pair, A.shape)


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen=st.sampled_from(["poisson2d", "poisson3d"]), size=st.integers(1, 150), seed=st.integers(0, 1000),
       pair=st.sampled_from(sd.FACTOR_PAIRS), kind=st.sampled_from(fs.KINDS), R=st.sampled_from([1, 2, 4, 8]),
       fuse=st.booleans(), dtype=st.sampled_from(DTYPES), pair_bytes=st.sampled_from([None, 8, 16, 64]),
       unsym=st.booleans())
def test_lean_rows_property(gen, size, seed, pair, kind, R, fuse, dtype, pair_bytes, unsym):
    """The lean rows give t0's factor and solve on the 5- and 7-point grids (random values on their
    patterns) under every schedule, with the rows the schedule fuses run in one lane or every row
    apart — a factor row apart waits for its pivots only, since a wavefront schedule puts x_k after
    it — and with the pairs side by side or padded apart (lean_defaults' rule or another). `unsym`:
    about a third of the off-diagonal entries dropped, each on its own, so that (i, k) is often
    stored without (k, i): the updates still land on diagonals only, where there are any."""
    A = matrix(gen, size, seed)
    mats = operands(pair, _some_dropped(A, seed) if unsym else A)
    b = np.random.default_rng(seed).standard_normal(mats[0].shape[0])
    ref = _reference(pair, mats, b, dtype, ("lean_property", gen, size, seed, pair, dtype, unsym))
    v = _vector(b, dtype)
    s = fs.inspect(pair, *mats, kind=kind)
    run = t3.prepare(pair, *mats, like=v, schedule=s, executor="dataflow", lean=True, block_rows=R, fuse_rows=fuse)
    assert run.lean and not run.data and run.claim == "stride" and run.block_rows == R
    if pair_bytes:
        run.pair_stride = t3_lean.pair_stride(pair_bytes, v.dtype)
    merged = t3.fused_rows(s, mats)
    assert run.fused == (int((merged >= 0).sum()) if fuse else 0)
    for call in range(3 if DEVICE == "cuda" else 2):        # on CUDA the 2nd captures a graph, the 3rd replays it
        _check(run(v), ref, pair, mats, dtype, f"lean {kind} R={R} fuse={fuse} call {call}")
    assert (run.graph is not None) == (DEVICE == "cuda")


def test_lean_rows_rule(monkeypatch):
    """executor="dataflow" (and executor=None on a GPU) runs a factor pair by the lean rows where
    runs_lean says so: updates only on diagonals (the 5- and 7-point grids, not the 27-point one)
    and rows that fit a lane's CHUNK (a star whose hub comes first, not one whose hub comes last).
    The defaults it takes: striding programs, fused rows, and lean_defaults' programs an SM,
    lanes a block and gap between pairs — LEAN_PROGRAMS_PER_SM on every level,
    LEAN_BLOCK_ROWS and LEAN_PAIR_BYTES where levels hold
    WIDE_LEVELS iterations on average (the 3D grid's at the benchmark sizes; here WIDE_LEVELS is
    lowered to the small grids' widths), else the NARROW_ ones; a gap that is no power of two,
    which would misalign a pair's vector store, is refused."""
    A3, A2, A27 = sm.poisson3d(8), sm.poisson2d(12), sm.poisson3d(5, points=27)
    depth = {}
    for name, A in (("3d", A3), ("2d", A2)):
        s = fs.inspect("spilu0_sptrsv", A, kind="sparse_fusion")
        depth[name] = (s.n1 + s.n2) / t3._depth(s, (A,))
    assert depth["3d"] > depth["2d"]
    monkeypatch.setattr(t3, "WIDE_LEVELS", (depth["3d"] + depth["2d"]) / 2)
    for pair in sd.FACTOR_PAIRS:
        for A, want in ((A3, True), (A2, True), (A27, False)):
            v = _vector(np.random.default_rng(_seed("rule", pair, A.shape)).standard_normal(A.shape[0]), "float64")
            s = fs.inspect(pair, A, kind="sparse_fusion")
            assert t3.runs_lean(rows.row_tables(pair, A)) is want
            run = t3.prepare(pair, A, like=v, schedule=s, executor="dataflow")
            assert run.lean is want and run.data is not want
            if want:
                R = t3.LEAN_BLOCK_ROWS if A is A3 else t3.NARROW_LEAN_BLOCK_ROWS
                P = t3.LEAN_PROGRAMS_PER_SM
                assert (run.block_rows, run.programs_per_sm, run.claim) == (R, P, "stride")
                gap = t3.LEAN_PAIR_BYTES if A is A3 else t3.NARROW_LEAN_PAIR_BYTES
                assert run.pair_stride == t3_lean.pair_stride(gap, v.dtype)
                assert run.fuse_rows and run.fused > 0
            # options only the values-as-flags kernel takes keep it
            for kw in ({"claim": "counter"}, {"programs_per_sm": 0}, {"tickets": "schedule"}):
                assert not t3.prepare(pair, A, like=v, schedule=s, executor="dataflow", **kw).lean
            assert not t3.prepare(pair, A, like=v, schedule=s, executor="dataflow", lean=False).lean
    # a star is diagonal-only too: its hub row, when it comes last, holds more lower entries than a
    # lane's CHUNK, unless the star has CHUNK leaves (an IC(0) row's diagonal step is no lower entry)
    for star, want in ((_arrow_first(40), True), (_arrow_last(32), False), (_arrow_last(t3.CHUNK + 1), True)):
        for pair in sd.FACTOR_PAIRS:
            t = rows.row_tables(pair, star)
            assert t.updates_only_diagonal and (t.most_lower <= t3.CHUNK) is want
            assert t3.runs_lean(t) is want
    monkeypatch.setattr(t3, "LEAN_ROWS", False)
    assert not t3.runs_lean(rows.row_tables("spic0_sptrsv", A3))
    # a gap that would misalign a pair's vector store is refused
    assert [t3_lean.pair_stride(b, torch.float64) for b in (8, 16, 64)] == [2, 2, 8]
    assert [t3_lean.pair_stride(b, torch.float32) for b in (8, 16, 64)] == [2, 4, 16]
    for bad in (24, 0, True, 8.0):
        with pytest.raises(ValueError, match="power of two"):
            t3_lean.pair_stride(bad, torch.float64)


def test_most_lower_bounds_a_lean_lane():
    """RowTables.most_lower counts a factor row's entries below its diagonal (what a lean lane holds:
    lean_plan sizes CH from it, runs_lean bounds it by CHUNK), whatever the order of the rows; and
    a star whose hub row holds exactly CHUNK of them runs by the lean rows, equal to t0."""
    rng = np.random.default_rng(11)
    for A in (sm.poisson2d(5), sm.poisson3d(4, points=27), sm.powerlaw_laplacian(60, m=3, seed=2)):
        p = rng.permutation(A.shape[0])
        for M in (A, sp.csr_matrix(A[p][:, p])):
            for pair in sd.FACTOR_PAIRS:
                L = sp.tril(sp.csr_matrix(M), k=-1).tocsr()
                assert rows.row_tables(pair, M).most_lower == int(np.diff(L.indptr).max()), pair
    star = _arrow_last(t3.CHUNK + 1)
    b = np.random.default_rng(12).standard_normal(star.shape[0])
    for pair in sd.FACTOR_PAIRS:
        v = _vector(b, "float64")
        run = t3.prepare(pair, star, like=v, executor="dataflow")
        assert run.lean and run.plan[2] == t3.CHUNK                # CH: the hub's CHUNK lower entries
        ref = _reference(pair, (star,), b, "float64", ("most_lower", pair))
        for call in range(3 if DEVICE == "cuda" else 2):
            _check(run(v), ref, pair, (star,), "float64", f"star of {t3.CHUNK} leaves, call {call}")


def test_lean_rows_refuse_what_they_cannot_run():
    """lean=True where the lean rows cannot run raises a ValueError naming why, before any launch."""
    v = _vector(np.random.default_rng(9).standard_normal(27), "float64")
    A = sm.poisson3d(3)
    cases = [(dict(lean="yes"), "lean must be True, False or None"),
             (dict(lean=True, executor="syncfree"), "lean=True runs a factor pair on the dataflow executor"),
             (dict(lean=True, executor="levels"), "lean=True runs a factor pair on the dataflow executor"),
             (dict(lean=True, executor="dataflow", claim="counter"), "programs stride"),
             (dict(lean=True, executor="dataflow", programs_per_sm=0, claim=None), "programs stride"),
             (dict(lean=True, executor="dataflow", tickets="schedule"), "tickets='schedule'")]
    for kw, match in cases:
        with pytest.raises(ValueError, match=re.escape(match)):
            t3.prepare("spilu0_sptrsv", A, like=v, **kw)
    with pytest.raises(ValueError, match="updates all land on the diagonal"):
        t3.prepare("spic0_sptrsv", sm.poisson3d(3, points=27), like=v, executor="dataflow", lean=True)
    L = sm.tril_csr(A)
    with pytest.raises(ValueError, match="lean=True runs a factor pair"):
        t3.prepare("sptrsv_spmv", L, A, like=v, executor="dataflow", lean=True)


@pytest.mark.parametrize("name,size,pair,how,seed", [c for c in BREAKDOWN_CASES if c[0] in ("poisson2d", "poisson3d")])
def test_lean_rows_breakdown_row_is_t0s(name, size, pair, how, seed):
    """The lean rows report a breakdown at the row t0 stops at (IC(0) keeps the non-positive pivot,
    ILU(0) the zero one; rows.results tests them after the launch), on every call."""
    A = _broken(name, size, pair, how, seed)
    b = np.random.default_rng(_seed("broken", name, pair, seed)).standard_normal(A.shape[0])
    with pytest.raises(ValueError, match="breaks down in row") as want:
        registry.get("sparse_fusion", "t0_numpy", pair)(A, b)
    row = re.search(r"breaks down in row (\d+)", str(want.value)).group(1)
    run = t3.prepare(pair, A, like=_vector(b, "float64"), executor="dataflow", lean=True)
    for call in range(3 if DEVICE == "cuda" else 2):        # on CUDA the calls after the first replay a graph
        with pytest.raises(ValueError, match=rf"breaks down in row {row}: pivot"):
            run(_vector(b, "float64"))
    assert (run.graph is not None) == (DEVICE == "cuda")


# ---------------------------------------------------------------- new values on a prepared pattern (refresh)

REFRESH_CASES = [pytest.param(pair, ex, i % 2 == 0, DTYPES[i % 2], id=f"{pair}-{ex}-{['tensor', 'scipy'][i % 2]}")
                 for i, (pair, ex) in enumerate((p, e) for p in PAIRS
                                                for e in ("t2", "levels", "syncfree", "dataflow", "chains",
                                                          "segments", "bands", "lean")
                                                if e in ("t2", "lean") or e in t3.executors_for(p))
                 if ex != "lean" or pair in sd.FACTOR_PAIRS]


@pytest.mark.parametrize("pair,executor,as_tensor,dtype", REFRESH_CASES)
def test_refresh_takes_new_values(pair, executor, as_tensor, dtype):
    """A runner given new values on its pattern (refresh) returns t0's results on them, from
    SciPy matrices or from tensors of the stored values, the calls before it having kept their
    launches (and on CUDA a factor pair's graph, kept and rewritten with REFRESH_KEEPS_GRAPH,
    else dropped); the bands' tables take the values where they are (a kept launch reads them)."""
    if executor == "lean":
        mats = operands(pair, matrix("poisson2d", 36, 3))
        b = np.random.default_rng(_seed(pair, "lean")).standard_normal(mats[0].shape[0])
    else:
        mats, b = _problem(pair)
    v = _vector(b, dtype)
    if executor == "t2":
        run = t2.prepare(pair, *mats, like=v)
    else:
        s = fs.inspect(pair, *mats, kind="sparse_fusion") if executor == "lean" else _schedule(pair, mats, "sparse_fusion")
        run = t3.prepare(pair, *mats, like=v, schedule=s,
                         executor="dataflow" if executor == "lean" else executor, lean=(executor == "lean") or None)
    for _ in range(2):
        run(v)
    graph = getattr(run, "graph", None)
    assert (graph is not None) == (DEVICE == "cuda" and executor not in ("t2", "bands") and t3.replays_graph(run))
    held = [t.data_ptr() for t in run.bands.tables[0]] if executor == "bands" else None
    # D·M·D: each matrix's pattern with other values (a triangular factor keeps its diagonal non-zero)
    new = [_randomised(M, np.random.default_rng(_seed(pair, executor, k))) for k, M in enumerate(mats)]
    given_ = [torch.tensor(M.data, dtype=getattr(torch, dtype), device=DEVICE) for M in new] if as_tensor else new
    assert run.refresh(*given_) is run
    assert getattr(run, "graph", None) is (graph if t3.REFRESH_KEEPS_GRAPH else None)
    if held is not None:       # in place, and what device_bands makes from the new values
        assert [t.data_ptr() for t in run.bands.tables[0]] == held
        fresh = t3_bands.device_bands(run.plan, t3_bands.pair_values(given_, getattr(torch, dtype), DEVICE),
                                      t3_bands.PREFETCH)
        assert all(torch.equal(x, y) for got, want in zip(run.bands.tables, fresh.tables) for x, y in zip(got, want))
    # a tensor in the runner's dtype is what the kernels see; SciPy's float64 values are rounded to it
    ref = _reference(pair, new, b, dtype, (pair, dtype, "refreshed", executor))
    for call in range(3 if DEVICE == "cuda" else 1):
        _check(run(v), ref, pair, mats, dtype, f"{executor} {pair} after refresh, call {call}")


@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.parametrize("pair", sd.FACTOR_PAIRS)
def test_refresh_with_rows_walking(pair, keep, monkeypatch):
    """refresh where walked rows work beside held ones (HOLD_SHARE 0.6, the cases of
    test_held_and_walked_rows_together): the walked rows' own copy of A's values (OWN), which on
    CUDA the kept graph holds, takes the new values too; with REFRESH_KEEPS_GRAPH off the graph
    is dropped and captured again, with the same results."""
    monkeypatch.setattr(t3, "REFRESH_KEEPS_GRAPH", keep)
    monkeypatch.setattr(rows, "HOLD_SHARE", 0.6)
    monkeypatch.setattr(rows, "_PATTERNS", {})
    gen, size = ("powerlaw_laplacian", 60) if pair == "spilu0_sptrsv" else ("poisson3d_27", 27)
    mats = operands(pair, matrix(gen, size, 5))
    b = np.random.default_rng(12).standard_normal(mats[0].shape[0])
    v = _vector(b, "float64")
    run = t3.prepare(pair, *mats, like=v, executor="dataflow", block_rows=2, lean=False)
    assert run.data and run.tables.walks and t3._works_in_own(run)
    for _ in range(2):
        run(v)
    graph = run.graph
    new = [_randomised(M, np.random.default_rng(_seed(pair, "walking", k))) for k, M in enumerate(mats)]
    run.refresh(*new)
    assert (graph is not None) == (DEVICE == "cuda") and run.graph is (graph if keep else None)
    ref = _reference(pair, new, b, "float64", (pair, "refreshed", "walking"))
    for call in range(3 if DEVICE == "cuda" else 1):
        _check(run(v), ref, pair, mats, "float64", f"{pair} walking, after refresh, call {call}")


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen=st.sampled_from(tuple(sm.GENERATORS)), size=st.integers(1, 60), seed=st.integers(0, 1000),
       pair=st.sampled_from(PAIRS), executor=st.sampled_from(["t2", "levels", "syncfree", "dataflow", "bands"]),
       dtype=st.sampled_from(DTYPES), rounds=st.integers(1, 3))
def test_refresh_property(gen, size, seed, pair, executor, dtype, rounds):
    """refresh over every generator, size, seed, pair and executor, several times in a row: each
    time t0's results on the newest values, as tensors and as SciPy matrices in turn."""
    assume(executor == "t2" or executor in t3.executors_for(pair))
    mats = operands(pair, matrix(gen, size, seed))
    b = np.random.default_rng(seed).standard_normal(mats[0].shape[0])
    v = _vector(b, dtype)
    run = (t2.prepare(pair, *mats, like=v) if executor == "t2"
           else t3.prepare(pair, *mats, like=v, schedule=fs.inspect(pair, *mats, kind="sparse_fusion"),
                           executor=executor))
    run(v)
    for r in range(rounds):
        new = [_randomised(M, np.random.default_rng(seed + 100 * r + k)) for k, M in enumerate(mats)]
        given_ = [torch.tensor(M.data, dtype=getattr(torch, dtype), device=DEVICE) for M in new] if r % 2 else new
        ref = _reference(pair, new, b, dtype, ("refresh_property", gen, size, seed, pair, dtype, r))
        _check(run.refresh(*given_)(v), ref, pair, mats, dtype, f"{executor} {pair} refresh {r}")


def test_refresh_takes_any_scipy_form():
    """refresh reads a CSR matrix with the prepared arrays where it is, and canonicalises any
    other form first (validation._values_on_pattern): COO, unsorted columns and a duplicate split
    in two all give the results of the canonical matrix."""
    pair = "sptrsv_spmv"
    mats, b = _problem(pair)
    L, A = (sd.csr(M) for M in mats)
    v = _vector(b, "float64")
    run = t3.prepare(pair, L, A, like=v, executor="dataflow")
    L2, A2 = (_randomised(M, np.random.default_rng(k + 40)) for k, M in enumerate((L, A)))
    ref = _reference(pair, (L2, A2), b, "float64", (pair, "refreshed", "forms"))
    n, rows_ = A2.shape[0], sd.row_ids(A2.indptr)
    flip = np.lexsort((-A2.indices, rows_))                          # each row's columns in reverse
    unsorted = sp.csr_matrix((A2.data[flip], A2.indices[flip], A2.indptr), shape=A2.shape)
    assert not unsorted.has_sorted_indices
    assert A2.indices[0] == 0                                        # row 0's first entry is its diagonal
    split = sp.coo_matrix((np.r_[A2.data, 0.25], (np.r_[rows_, 0], np.r_[A2.indices, 0])), shape=(n, n))
    split.data[0] -= 0.25                                            # entry (0, 0) stored twice, summing to a_00
    for form in (A2.tocoo(), unsorted, split, sp.csr_array(A2)):
        _check(run.refresh(L2, form)(v), ref, pair, mats, "float64", f"refresh from {type(form).__name__}")


def test_refresh_rejects_bad_values_and_keeps_the_old():
    """refresh's checks (validation.validate_refresh), each with its message, before anything is
    written: the runner still returns the results of the values it had."""
    pair = "sptrsv_spmv"
    mats, b = _problem(pair)
    L, A = (sd.csr(M) for M in mats)
    v = _vector(b, "float64")
    ref = _reference(pair, mats, b, "float64", (pair, "float64"))
    run = t3.prepare(pair, *mats, like=v, executor="dataflow")
    zero_diag = L.copy()
    zero_diag.data[sd.diag_positions(L.indptr, L.indices)[3]] = 0.0
    missing = sd.csr(sp.csr_matrix(L.toarray() * (1 - np.eye(L.shape[0], k=-1))))     # no first subdiagonal
    inf = A.copy()
    inf.data[5] = np.inf
    tensor = lambda M, **kw: torch.tensor(M.data, device=DEVICE, **kw)                 # noqa: E731
    cases = [((L,), ValueError, "refresh takes the pair's 2 matrices (L, A), got 1"),
             ((missing, A), ValueError, "L's sparsity pattern is not the one this runner was prepared for"),
             ((L, sp.csr_matrix(A[:-1, :-1])), ValueError, "A's sparsity pattern is not the one"),
             ((zero_diag, A), ValueError, "L has a zero diagonal entry in row 3"),
             ((tensor(zero_diag), A), ValueError, "L has a zero diagonal entry in row 3"),
             ((L, inf), ValueError, "A has a non-finite value inf"),
             ((L, tensor(inf)), ValueError, "A has non-finite values"),
             ((L, tensor(A)[:-1]), ValueError, f"A's values must be a 1-D tensor of the {A.nnz} values"),
             ((L, tensor(A).reshape(1, -1)), ValueError, "A's values must be a 1-D tensor"),
             ((L, tensor(A).to(torch.int32)), TypeError, "A has dtype torch.int32"),
             ((L, list(A.data)), ValueError, "A must be a SciPy sparse matrix or a 1-D tensor of its stored values")]
    for args, kind, match in cases:
        with pytest.raises(kind, match=re.escape(match)):
            run.refresh(*args)
        _check(run(v), ref, pair, mats, "float64", f"after a refused refresh ({match})")
    with pytest.raises(ValueError, match="L has a zero diagonal entry in row 3"):
        t2.prepare(pair, *mats, like=v).refresh(zero_diag, A)
