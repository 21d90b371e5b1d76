"""t3's bands executor (tiers/kernels/sparse_fusion_executors/bands.py): the vector pairs against t0
with the bands its rule cuts and with small matrices cut into many bands (every ring depth), the
plans' order (a band reads only bands of lower number, the programs' guarantee of progress), the
rule's bands on the grids, and its errors."""
import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import DEVICE
from tests.test_sparse_fusion import matrix, operands
from tests.test_sparse_fusion_executors import _check, _reference
from tiers import sparse_dags as sd
from tiers import sparse_matrices as sm
from tiers.kernels.sparse_fusion_executors import bands
from tiers.t3_triton_fused import sparse_fusion as t3

DTYPES = ("float64", "float32")


def _run(pair, mats, b, dtype, K, shape):
    """The pair by bands.band_plan's bands (shape: (rows a band, LANES) or the rule's): a prepared
    call whose plan is swapped for that one."""
    mats = [sd.csr(M) for M in mats]
    v = torch.tensor(b, dtype=getattr(torch, dtype), device=DEVICE)
    run = t3.prepare(pair, *mats, like=v, executor="bands")
    run.plan = plan = bands.band_plan(pair, mats, K=K, shape=shape)
    run.bands = bands.device_bands(plan, bands.pair_values(mats, v.dtype, DEVICE), bands.PREFETCH)
    run.num_warps = bands.band_warps(plan.lanes)
    return plan, run(v)


def _ordered(plan):
    """Every APART slot of every kernel reads an output row of a band of lower number in the
    launch's order (kernel 1's bands, then kernel 2's), every OWN slot a row of its own band or
    the input; every output is written once. X = [input | out₁ | out₂]."""
    n, lanes = plan.n, plan.lanes
    band_of = np.full(3 * n, -1)
    offset = 0
    for p in plan.kernels:
        rows = p.row.reshape(p.steps, lanes)
        step_band = np.repeat(np.arange(p.P), np.diff(p.SP))
        written = rows >= 0
        assert (rows[written] >= n).all() and (band_of[rows[written]] == -1).all()
        band_of[rows[written]] = offset + np.broadcast_to(step_band[:, None], rows.shape)[written]
        offset += p.P
    assert (band_of[n:] >= 0).all()
    offset = 0
    for p in plan.kernels:
        word = p.word.reshape(p.steps, p.C, lanes)
        step_band = offset + np.repeat(np.arange(p.P), np.diff(p.SP))
        kind, pos = bands.slot_words(word)
        reader = np.broadcast_to(step_band[:, None, None], word.shape)
        apart = kind == bands.APART
        assert (pos[apart] >= n).all() and (band_of[pos[apart]] < reader[apart]).all()
        own = (kind == bands.OWN) & (pos >= n)
        assert (band_of[pos[own]] == reader[own]).all()
        offset += p.P


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pair", bands.PAIRS)
@pytest.mark.parametrize("gen,size", [("poisson2d", 100), ("poisson3d_27", 64), ("banded_spd", 60),
                                      ("powerlaw_laplacian", 50)])
def test_bands_match_t0(gen, size, pair, dtype):
    """Through prepare, with the rule's bands (one band on matrices this small)."""
    mats = operands(pair, matrix(gen, size, 0))
    b = np.random.default_rng(size).standard_normal(mats[0].shape[0])
    v = torch.tensor(b, dtype=getattr(torch, dtype), device=DEVICE)
    run = t3.prepare(pair, *mats, like=v, executor="bands")
    _check(run(v), _reference(pair, mats, b, dtype, ("bands", gen, size, pair, dtype)), pair, mats, dtype,
           f"bands {pair} {gen}")


@pytest.mark.parametrize("K", [0, 1, 2, 4])
@pytest.mark.parametrize("pair", bands.PAIRS)
def test_many_bands_every_ring(pair, K):
    """A 2D grid of 12 × 12 in bands of 12 rows (a line each, every row reading the line before
    from another band) and 32 lanes."""
    mats = operands(pair, matrix("poisson2d", 144, 1))
    b = np.random.default_rng(K).standard_normal(144)
    plan, out = _run(pair, mats, b, "float64", K, (12, 32))
    assert plan.kernels[0].P + plan.kernels[1].P > 2
    assert sum(p.edges_apart for p in plan.kernels) > 0
    _ordered(plan)
    _check(out, _reference(pair, mats, b, "float64", ("bands lines", pair, K)), pair, mats, "float64",
           f"{pair} K={K}")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen=st.sampled_from(sorted(sm.GENERATORS)), size=st.integers(2, 90), seed=st.integers(0, 50),
       pair=st.sampled_from(bands.PAIRS), rows=st.integers(1, 40), lanes=st.sampled_from([32, 64]),
       K=st.sampled_from([0, 1, 2, 3]), dtype=st.sampled_from(DTYPES))
def test_bands_property(gen, size, seed, pair, rows, lanes, K, dtype):
    mats = operands(pair, matrix(gen, size, seed))
    b = np.random.default_rng(seed).standard_normal(mats[0].shape[0])
    plan, out = _run(pair, mats, b, dtype, K, (rows, lanes))
    _ordered(plan)
    for p in plan.kernels:
        assert p.K == 0 or (np.diff(p.SP) % p.K == 0).all()
    _check(out, _reference(pair, mats, b, dtype, ("bands property", gen, size, seed, pair, dtype)), pair, mats,
           dtype, f"{pair} {gen} {size} rows={rows} K={K}")


@pytest.mark.parametrize("A, rows, lanes", [
    (sm.poisson2d(40), 32 * 40, 32),           # a line is a chain: 32 lines a band, a level of 32
    (sm.poisson3d(40), 40 * 40, 64),           # a plane: levels x + y of up to 40 rows
    (sm.poisson3d(12), 12 * 12 * 4, 64),       # 2 planes hold levels of up to 24 rows, 4 of up to 48
])
def test_band_shape_on_grids(A, rows, lanes):
    assert bands.band_shape(sd.csr(sp.tril(A)), lower=True) == (rows, lanes)
    assert bands.band_shape(sd.csr(sp.triu(A)), lower=False) == (rows, lanes)


def test_band_shape_takes_the_plane_not_the_largest_offset():
    """The 27-point grid's largest offset is a plane, a line and a row (421 rows on a 20³ grid);
    its bands are whole planes (400 rows), a power of two of them."""
    L = sd.csr(sp.tril(sm.poisson3d(20, points=27)))
    rows, lanes = bands.band_shape(L, lower=True)
    assert rows % 400 == 0 and (rows // 400) & (rows // 400 - 1) == 0
    assert lanes in (32, 64, 128)


def test_bands_errors():
    A = sm.poisson2d(4)
    v = torch.zeros(16, dtype=torch.float64, device=DEVICE) + 1
    with pytest.raises(ValueError, match="factor in place"):
        t3.prepare("spilu0_sptrsv", A, like=v, executor="bands")
    with pytest.raises(ValueError, match="vector pairs"):
        bands.band_plan("spic0_sptrsv", [sd.csr(A)])
    star = sp.lil_matrix((80, 80))                  # a row of 80 entries: more than a record holds
    star[79, :] = 1.0
    star.setdiag(100.0)
    star = sd.csr(star)
    with pytest.raises(ValueError, match=f"at most {bands.MAX_SLOTS}"):
        t3.prepare("sptrsv_spmv", star, star, like=torch.ones(80, dtype=torch.float64, device=DEVICE),
                   executor="bands")
    with pytest.raises(ValueError, match="the bands executor's programs stride over the bands; it needs "
                                         "programs_per_sm > 0"):
        t3.prepare("sptrsv_spmv", sd.csr(sp.tril(A)), A, like=v, executor="bands", programs_per_sm=0)
    run = t3.prepare("sptrsv_spmv", sd.csr(sp.tril(A)), A, like=v, executor="bands")
    with pytest.raises(ValueError, match="prepared for"):
        run(v.float())
    with pytest.raises(ValueError, match="shape"):
        run(v[:3])
