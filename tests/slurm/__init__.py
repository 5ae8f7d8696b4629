"""The local multi-node SLURM cluster used by the `slurm`-marked tests (see README.md beside this file)."""
