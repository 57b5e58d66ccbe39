"""GPU work outside Dagster's process: LLaMA-Factory training, checkpoint serving and evaluation, the
launchers that run it (a local subprocess through Dagster Pipes, or Slurm) and the Pipes entry point
(``entry``) that runs inside it."""
