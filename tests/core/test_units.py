"""Memory figures keep their significant digits (issue 20: a CPU trial's peak printed as '0.0/0.5 GB')."""

from launcher.core.units import gb_text


def test_small_memory_figures_keep_three_significant_digits_and_large_ones_one_decimal():
    assert gb_text(0.0347) == "0.0347" and gb_text(0.1049) == "0.105" and gb_text(2.5) == "2.5"
    assert gb_text(75.3123) == "75.3" and gb_text(758.84) == "758.8" and gb_text(9.996) == "10"
