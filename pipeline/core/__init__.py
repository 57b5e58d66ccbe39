"""The shared vocabulary every stage speaks (the bottom of the foundation tier; imports nothing else of
``pipeline``): canonical state and Δ, the environment protocol, trajectories and actions, the frozen clock's
timeline, outcomes, strata rules, task issues, the simulator prompt protocol, bounds on untrusted answers,
run profiles and settings."""
