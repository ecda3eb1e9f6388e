"""bench/masks.py's rounds: figures are medians over the rounds, ratios taken between them."""
from __future__ import annotations

from bench.masks import combine_rounds


def _round(sg: float, xg: float, llg: float) -> dict:
    def engine(v: float) -> dict:
        fig = {"p50": v, "p90": 2 * v, "p99": 3 * v, "max": 4 * v}
        return {"version": "x", "compiled": 3, "tokenizer_prep_s": v, "peak_rss_mb": 10 * v,
                "full_gc_fills_common": [[v, 1.0]], "compile_ms_common": dict(fig), "mask_us_common": dict(fig),
                "first_pass_mask_us_common": dict(fig), "first_pass_per_schema_us_common": dict(fig),
                "warm_mask_us_common": dict(fig), "request_total_ms_common": dict(fig),
                "mask_us_common_without_full_gc": dict(fig)}
    return {"structgen": engine(sg), "xgrammar": engine(xg), "llguidance": engine(llg), "common_schemas": 3}


def test_one_round_is_returned_as_it_is():
    r = _round(1.0, 2.0, 3.0)
    assert combine_rounds([r]) is r


def test_figures_are_medians_and_ratios_are_between_medians():
    rounds = [_round(1.0, 2.0, 8.0), _round(9.0, 4.0, 2.0), _round(3.0, 6.0, 4.0)]
    out = combine_rounds(rounds)
    assert out["rounds"] == 3
    assert out["structgen"]["compile_ms_common"] == {"p50": 3.0, "p90": 6.0, "p99": 9.0, "max": 12.0}
    assert out["xgrammar"]["warm_mask_us_common"]["p50"] == 4.0
    assert out["llguidance"]["request_total_ms_common"]["p99"] == 12.0
    assert out["structgen"]["mask_us_common_without_full_gc"]["max"] == 12.0  # every pct() figure
    # best peer of the medians: llguidance 4.0 against XGrammar 4.0 -> 3.0 / 4.0
    assert out["ratio_structgen_to_best_peer"]["compile_ms_common.p50"] == 0.75
    # the rounds' own ratios: 1/2, 9/2, 3/4
    assert [r["compile_ms_common.p50"] for r in out["ratio_per_round"]] == [0.5, 4.5, 0.75]
    assert out["structgen"]["peak_rss_mb"] == 90.0
    assert len(out["structgen"]["full_gc_fills_common"]) == 3


def test_heldout_draw_figures():
    """bench/heldout.py: per draw, the compile median, the medians over the schemas of each
    schema's median and p99 first-pass fill, the largest first-pass fill, the median of the
    warm fills pooled."""
    from bench.heldout import p99, stats

    first_a = [float(x) for x in range(1, 201)]  # p99 of 200 fills: the 199th smallest
    recs = [{"compile_ms": 3.0, "first": first_a, "warm": [1.0, 1.0]},
            {"compile_ms": 1.0, "first": [5.0, 7.0, 9.0], "warm": [2.0]},
            {"compile_ms": 2.0, "first": [4.0], "warm": [3.0, 3.0, 3.0]}]
    assert p99(first_a) == 199.0 and p99([5.0, 7.0, 9.0]) == 9.0
    assert stats(recs) == {"compile_ms": 2.0, "first_pass_us": 7.0, "first_pass_p99_us": 9.0,
                           "worst_us": 200.0, "warm_us": 2.5}


def test_batch_two_process_control():
    """bench/batch.py's two-process control: even rounds both processes walk, odd rounds one
    alone, the two taking turns; the figures are the medians alone and together, and two
    cores' throughput 2a/b in units of one core's."""
    from bench.batch import control_round, control_summary

    plan = [[control_round(me, r) for me in (0, 1)] for r in range(6)]
    assert plan[0] == plan[2] == plan[4] == [(True, True), (True, True)]
    assert plan[1] == [(True, False), (False, False)] and plan[3] == [(False, False), (True, False)]
    assert plan[5] == plan[1]
    walks = [(0, True, 0.012), (0, True, 0.016), (1, False, 0.010), (2, True, 0.014), (2, True, 0.020),
             (3, False, 0.012), (5, False, 0.011)]
    out = control_summary(walks)
    assert out["alone_s_median"] == 0.011 and abs(out["together_s_median"] - 0.015) < 1e-12
    assert abs(out["two_core_throughput"] - 2 * 0.011 / 0.015) < 1e-12
    assert sorted(out["alone_s"]) == [0.010, 0.011, 0.012] and len(out["together_s"]) == 4
