"""Running: submission (submitit), the ledger, the sweep loop, judging finished jobs, progress, MLflow link."""
