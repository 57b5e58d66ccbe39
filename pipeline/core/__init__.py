"""The shared vocabulary every stage speaks (the bottom layer; imports nothing else of ``pipeline``):
canonical state and Δ, the environment protocol, trajectories and actions, the frozen clock's timeline,
outcomes, strata rules, task issues, the simulator prompt protocol, bounds on untrusted answers, run
profiles and Markdown reports."""
