"""The compute probe: GEMM TFLOP/s at the shapes a plan will run and one transformer layer's forward + backward.

`python -m launcher.computebench` (launcher/computebench/__main__.py, the job side: torch + stdlib, and the embedded
workload's transformer block) measures; launcher.computebench.result is the JSON file both sides share (stdlib
only); launcher.computebench.view is the estimator's view of a result (the GEMM efficiency curve fitted to the
measured shapes) and the per-sweep cache; launcher.run.compute runs the probe before a sweep's trials.

This package's __init__ imports nothing, so that the job side (`python -m launcher.computebench`, which imports
the package first) does not pay for the planner's imports.
"""
