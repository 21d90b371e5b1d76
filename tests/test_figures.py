"""Figures are redrawn from the recorded data, with no GPU, by the same code the CLI runs."""
from tiers import cli, figures
from tiers.bench.common import load_rows


def test_recorded_attention_data_is_complete():
    header, rows = load_rows("attention")
    for key in ("device", "torch", "triton", "date"):
        assert header["environment"][key]
    ok = {(r["provider"], r["mode"]) for r in rows if r["status"] == "ok"}
    for prov in ("t3_triton_fused", "sdpa_flash", "sdpa_cudnn", "flex"):
        assert (prov, "fwd") in ok and (prov, "fwd_bwd") in ok, prov


def test_draw_all_writes_every_figure(tmp_path):
    paths = figures.draw_all(tmp_path)
    # every figure whose benchmark has recorded data is drawn; those measured so far must be there
    assert {p.name for p in paths} == {f"{n}.png" for n in figures.recorded()}
    assert {"attention_throughput", "attention_memory", "neighborhood_paper", "neighborhood_field",
            "neighborhood_memory", "sparse_attention_speedup", "sparse_attention_metadata"} <= set(figures.recorded())
    assert all(p.stat().st_size > 10_000 for p in paths)


def test_self_check_runs_every_tier():
    from tiers import registry
    report = cli.self_check()
    assert "FAILED" not in report
    assert report.count(" ok") == sum(len(a.tiers) - 1 for a in registry.ALGORITHMS.values())


def test_draw_dataflow_blocks_counts_the_plan():
    """The picture of a dataflow plan (draw_dataflow_blocks) draws every row of both kernels once,
    numbered by its block, and titles each panel with the reads between blocks that the joint DAG
    has inside that kernel (a grid's rows fit their records, so every one is in the plan)."""
    import matplotlib
    import numpy as np
    import torch
    matplotlib.use("Agg")
    from tiers import sparse_dags as dags
    from tiers.bench import sparse_fusion as bench
    from tiers.fusion_schedules import inspect
    from tiers.sparse_matrices import poisson2d
    from tiers.t3_triton_fused import sparse_fusion as t3

    G = poisson2d(5)
    mats = bench.operands("sptrsv_spmv", G)
    run = t3.prepare("sptrsv_spmv", *mats, like=torch.zeros(G.shape[0], dtype=torch.float64), executor="dataflow",
                     schedule=inspect("sptrsv_spmv", *mats, kind="wavefront"))
    axes = figures.draw_dataflow_blocks(run, 5)
    u, v = (np.asarray(x) for x in dags.joint_dag("sptrsv_spmv", *mats).sources())
    n = G.shape[0]
    assert [len(ax.collections[1].get_offsets()) for ax in axes] == [n, n]
    assert f"\n{int(((u < n) & (v < n)).sum())} reads between its blocks" in axes[0].get_title()
    assert f"0 reads between its blocks, {int(((u < n) & (v >= n)).sum())} of kernel 1's" in axes[1].get_title()
