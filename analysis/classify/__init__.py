"""`python -m analysis.classify LOG...`: the command line of the failure classifier (analysis/classify/__main__.py).

The classifier itself is analysis.logs.classify (with its pattern tables, analysis.logs.patterns); this package
only keeps the command's name."""
