"""GPU jobs (training, evaluation) and the launchers that run them: a local subprocess or Slurm."""
