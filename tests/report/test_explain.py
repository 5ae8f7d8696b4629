"""The winner's paragraph: a margin is stated with the spread behind it, a tie within noise says so."""

from analysis.report.explain import TIED, explain_winner, verdict
from launcher.core.ranking import decide, group_repeats, rank


def trial(h, tokens, headroom=0.5, gpus=4, repeat_of=""):
    layout = {"gpus": gpus, "nodes": 1, "tp": 1, "pp": 1, "dp": gpus, "mbs": 1, "gbs": 8}
    return {"config_hash": h, "state": "ok", "layout": layout, "repeat_of": repeat_of,
            "metrics": {"tokens_per_s": tokens, "headroom": headroom, "peak_mem_gb": 0.1}, "predicted": {}}


def test_a_clear_winner_states_its_margin_with_the_spread_of_its_runs():
    ranked = rank(group_repeats([trial("aaaaaaaa1", 1200), trial("aaaaaaaa1~r1", 1180, repeat_of="aaaaaaaa1"),
                                 trial("bbbbbbbb2", 1000), trial("bbbbbbbb2~r1", 1010, repeat_of="bbbbbbbb2")]))
    text = explain_winner(ranked, 0.5, 0.02)
    assert "18% faster than the next best" in text and TIED not in text
    assert "median of 2 runs, spread 2%" in text and "1,190 tokens/s" in text
    assert verdict(decide(ranked, 0.02), 0.02).startswith("Confirmed: 18% better")


def test_a_margin_inside_the_spread_is_a_tie_picked_on_headroom_or_cost():
    trials = [trial("aaaaaaaa1", 1100, headroom=0.2), trial("aaaaaaaa1~r1", 1400, repeat_of="aaaaaaaa1"),
              trial("bbbbbbbb2", 1200, headroom=0.6, gpus=8), trial("bbbbbbbb2~r1", 1190, repeat_of="bbbbbbbb2")]
    ranked = rank(group_repeats(trials))
    text = explain_winner(ranked, 0.5, 0.02)
    assert text.startswith(TIED) and "faster than" not in text
    assert ranked[0]["config_hash"] == "bbbbbbbb2" and "keeps 20% memory headroom" not in text.split("Chosen")[1]
    assert "needs 4 GPUs instead of 8: the cheaper choice" in text


def test_single_measurements_say_that_their_spread_is_unknown():
    text = explain_winner(rank([trial("aaaaaaaa1", 1500), trial("bbbbbbbb2", 1000)]), 0.5, 0.02)
    assert "50% faster" in text and "single measurement" in text and "one run" in text


def test_a_tie_states_the_measured_noise_and_the_confidence_behind_it():
    """The band is not a constant: the text says how much noise the repeats measured and at what confidence."""
    trials = [trial("aaaaaaaa1", 1100, headroom=0.2), trial("aaaaaaaa1~r1", 1400, repeat_of="aaaaaaaa1"),
              trial("bbbbbbbb2", 1200, headroom=0.6), trial("bbbbbbbb2~r1", 1190, repeat_of="bbbbbbbb2")]
    ranked = rank(group_repeats(trials))
    d = decide(ranked, 0.02)
    text = explain_winner(ranked, 0.5, 0.02)
    assert f"run-to-run noise {d.noise_sd:.0%} over 2 repeat(s)" in text and "at 95% confidence" in text
    assert verdict(d, 0.02).startswith(TIED) and "planned memory headroom, then cost" in verdict(d, 0.02)
