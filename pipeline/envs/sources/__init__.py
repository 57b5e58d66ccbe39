"""The environment sources, one module each (:class:`pipeline.envs.source.EnvironmentSource`); they
are registered in :mod:`pipeline.envs.registry`."""
