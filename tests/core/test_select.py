import math

from launcher.core.ranking import margin_over_next, rank, select_best


def t(h, tokens, headroom, state="ok"):
    return {"config_hash": h, "state": state, "metrics": {"tokens_per_s": tokens, "headroom": headroom}}


def test_fastest_ok_trial_wins():
    trials = [t("a", 100, 0.5), t("b", 150, 0.1), t("c", 900, 0.9, state="oom")]
    assert select_best(trials)["config_hash"] == "b"


def test_ties_within_noise_go_to_headroom():
    trials = [t("a", 100.0, 0.05), t("b", 99.0, 0.40), t("c", 90.0, 0.9)]
    assert select_best(trials, noise_tolerance=0.02)["config_hash"] == "b"
    assert select_best(trials, noise_tolerance=0.0)["config_hash"] == "a"


def test_rank_keeps_everyone_once_and_margin():
    ranked = rank([t("a", 100.0, 0.05), t("b", 99.5, 0.4), t("c", 50.0, 0.9)])
    assert [r["config_hash"] for r in ranked] == ["b", "a", "c"]
    assert abs(margin_over_next(rank([t("a", 120, 0.1), t("b", 100, 0.1)])) - 0.2) < 1e-9


def test_no_ok_trials():
    assert select_best([t("a", 0, 0.1), t("b", 100, 0.1, state="failed")]) is None


def test_repeats_rank_by_median_with_spread():
    from launcher.core.ranking import group_repeats

    trials = [t("a", 130, 0.3), {**t("a~r1", 90, 0.2), "repeat_of": "a"}, {**t("a~r2", 100, 0.25), "repeat_of": "a"},
              t("b", 110, 0.3), {**t("b~r1", 108, 0.3), "repeat_of": "b"}, {**t("b~r2", 112, 0.3), "repeat_of": "b"}]
    folded = group_repeats(trials)
    assert [f["config_hash"] for f in folded] == ["a", "b"]
    a, b = folded
    assert a["metrics"]["tokens_per_s"] == 100 and b["metrics"]["tokens_per_s"] == 110
    assert abs(a["metrics"]["tokens_per_s_spread"] - 0.4) < 1e-9 and a["metrics"]["headroom"] == 0.2
    assert a["n_runs"] == 3
    # a single lucky run of `a` (130) would have won; the medians say b.
    assert select_best(folded)["config_hash"] == "b" and select_best(trials)["config_hash"] == "a"


def test_the_objective_decides_the_winner():
    from launcher.core.ranking import rank

    big = {"config_hash": "big", "state": "ok", "layout": {"gpus": 64}, "metrics": {"tokens_per_s": 1000.0}}
    small = {"config_hash": "small", "state": "ok", "layout": {"gpus": 8}, "metrics": {"tokens_per_s": 200.0}}
    assert rank([big, small])[0]["config_hash"] == "big"
    assert rank([big, small], objective="tokens_per_s_per_gpu")[0]["config_hash"] == "small"
    assert rank([big, small], objective="time_to_target")[0]["config_hash"] == "big"


def test_a_stopped_early_trial_is_never_the_winner():
    """Its partial throughput was known worse than the best when it was stopped; a noisy partial figure above the
    best must not make it win."""
    trials = [t("ok", 100.0, 0.5), t("partial", 500.0, 0.9, state="stopped_early")]
    assert select_best(trials)["config_hash"] == "ok"
    assert [x["config_hash"] for x in rank(trials)] == ["ok"]


def rep(h, base, tokens, headroom=0.5):
    return {**t(h, tokens, headroom), "repeat_of": base}


def test_the_finalists_are_the_trials_the_best_does_not_beat_and_widen_with_the_measured_noise():
    from launcher.core.ranking import finalists

    single = [t("a", 1000, 0.5), t("b", 990, 0.5), t("c", 900, 0.5), t("d", 500, 0.5)]
    assert finalists(single, 3, 0.02) == ["a", "b"]          # no spread measured yet: the tolerance alone
    assert finalists(single, 1, 0.02) == ["a"]               # at most confirm_top
    assert finalists(single, 0, 0.02) == []                  # confirmation off
    # a quiet repeat (1%): the band stays narrow, c (10% behind) is beaten and not re-measured
    quiet = single + [rep("a~r1", "a", 1010), rep("b~r1", "b", 1000), t("e", 100, 0.5), rep("e~r1", "e", 101)]
    assert finalists(quiet, 3, 0.02) == ["a", "b"]
    # a's repeat shows a noisy machine (1000 then 800): c is no longer beaten, and joins
    noisy = single + [rep("a~r1", "a", 800), rep("b~r1", "b", 1000)]
    assert "c" in finalists(noisy, 4, 0.02)


def test_the_winner_leads_the_finalists_even_when_it_won_a_tie_on_headroom():
    """b is 0.5% slower than a but has more memory headroom, so b is the winner: with confirm_top=1 it is b that
    is re-measured, never a winner left on a single measurement."""
    from launcher.core.ranking import finalists

    trials = [t("a", 1000, 0.1), t("b", 995, 0.6), t("c", 500, 0.9)]
    assert select_best(trials)["config_hash"] == "b"
    assert finalists(trials, 1, 0.02) == ["b"]
    assert finalists(trials, 3, 0.02) == ["b", "a"]


def test_a_winner_beyond_the_noise_is_confirmed_and_a_near_one_is_tied():
    from launcher.core.ranking import decide, group_repeats

    clear = rank(group_repeats([t("a", 1200, 0.3), rep("a~r1", "a", 1180), t("b", 1000, 0.5),
                                rep("b~r1", "b", 1010)]))
    d = decide(clear, 0.02)
    assert d.confirmed and d.tied == () and abs(d.margin - (1190 / 1005 - 1)) < 1e-9 and d.n_runs == 2
    # 10% apart, but the winner's two runs differ by 25%: the pooled run-to-run sd (2 repeats) is log(1.25) / 2,
    # the difference of two medians of 2 runs has that standard error, and t(2 df, 95%) = 2.920 of it is the band
    noisy = rank(group_repeats([t("a", 1100, 0.3), rep("a~r1", "a", 1375), t("b", 1125, 0.5),
                                rep("b~r1", "b", 1125)]))
    d = decide(noisy, 0.02)
    sd = math.log(1.25) / 2
    assert not d.confirmed and d.tied == ("a",) and d.noise_df == 2 and abs(d.noise_sd - sd) < 1e-12
    assert abs(d.band - (math.exp(math.log(1.02) + 2.920 * sd) - 1)) < 1e-12
    assert noisy[0]["config_hash"] == "b"  # the tie goes to memory headroom
    assert decide([], 0.02) is None
    assert decide(rank([t("a", 100, 0.5)]), 0.02).margin is None


def test_the_noise_band_is_the_tolerance_without_a_measured_spread_and_widens_with_the_runs_steps():
    from launcher.core.ranking import noise_band

    assert noise_band(t("a", 100, 0.5), t("b", 100, 0.5), 0.05) == 0.05
    steady = {"tokens_per_s": 100.0, "step_time_s": 1.0, "step_time_std_s": 0.01, "n_measured": 4}
    shaky = {**steady, "step_time_std_s": 0.3}
    a, b = ({"config_hash": h, "state": "ok", "metrics": m} for h, m in (("a", steady), ("b", steady)))
    c = {"config_hash": "c", "state": "ok", "metrics": shaky}
    assert 0.05 < noise_band(a, b, 0.05) < noise_band(a, c, 0.05)
