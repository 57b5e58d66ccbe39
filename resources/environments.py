"""Which environment sources and tasks feed collection."""

from dagster import Config, ConfigurableResource
from pydantic import Field

from pipeline.envs import bfcl
from pipeline.envs.bfcl_tasks import BfclTaskFile, default_task_files


class BfclTaskFileConfig(Config):
    """A task file in bfcl's multi-turn format plus its ground-truth file."""

    tasks: str = Field(description="JSON-lines task file (id, involved_classes, initial_config, ...).")
    answers: str = Field(description="JSON-lines ground-truth file (id, ground_truth).")
    category: str = Field(default="custom", description="Category label; 'long_context' loads long-context scenarios.")


class EnvironmentSourcesResource(ConfigurableResource):
    """The environment sources: bfcl-eval's multi-turn categories and extra bfcl-format task files."""

    bfcl_categories: list[str] = Field(
        default=list(bfcl.CATEGORIES), description="bfcl-eval multi-turn categories to replay."
    )
    bfcl_task_files: list[BfclTaskFileConfig] = Field(
        default_factory=list, description="Extra task files in bfcl's format (your own tasks)."
    )

    def bfcl_files(self) -> list[BfclTaskFile]:
        from pathlib import Path

        files = default_task_files(self.bfcl_categories) if self.bfcl_categories else []
        files += [BfclTaskFile(f.category, Path(f.tasks), Path(f.answers)) for f in self.bfcl_task_files]
        return files
