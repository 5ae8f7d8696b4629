"""Phase 4, running: the sweep loop and its hooks, the search (scheduler, calibration in the loop), submission
(submitit: local processes, SLURM arrays), the keeper, the ledger, the sweep folder, progress, the network probe."""
