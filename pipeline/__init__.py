"""envsim-forge domain core: environments, labeling, strata, selection, export (no Dagster here).

Importing the package changes nothing in the process; the entry points (``./forge``'s CLI, the
Dagster code location ``assets.definitions``) call ``pipeline.core.settings.prepare_process()`` first."""
