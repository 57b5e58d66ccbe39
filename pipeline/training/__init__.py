"""GPU work outside Dagster's process: LLaMA-Factory training, checkpoint serving and evaluation, and the
launchers that run it (Slurm here; a local subprocess through Dagster's Pipes client in ``resources/``). The
Pipes side that runs inside a job is ``assets/training_entry.py``."""
