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
