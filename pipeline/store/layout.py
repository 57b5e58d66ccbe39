"""Where the tables of record live under the data root (default ``./data``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_DATA_ROOT = "data"


def default_data_root() -> Path:
    return Path(os.environ.get("ENVSIM_DATA_ROOT", DEFAULT_DATA_ROOT))


@dataclass(frozen=True)
class DataLayout:
    root: Path

    @classmethod
    def at(cls, root: str | os.PathLike[str] | None = None) -> "DataLayout":
        return cls(Path(root) if root else default_data_root())

    @property
    def environments(self) -> Path:
        return self.root / "environments.parquet"

    @property
    def tool_code(self) -> Path:
        return self.root / "tool_code.parquet"

    @property
    def trajectories_dir(self) -> Path:
        return self.root / "trajectories"

    @property
    def trajectories(self) -> Path:
        return self.trajectories_dir / "trajectories.parquet"

    def trajectory_files(self) -> list[str]:
        """Every file of the trajectories table: the unpartitioned ``trajectories.parquet`` and the
        per-partition ``part-<partition>.parquet`` files a partitioned collection writes."""
        files = [self.trajectories] if self.trajectories.exists() else []
        return [str(p) for p in files + sorted(self.trajectories_dir.glob("part-*.parquet"))]

    @property
    def collection_issues(self) -> Path:
        return self.trajectories_dir / "issues.parquet"

    @property
    def steps_dir(self) -> Path:
        return self.root / "steps"

    def step_parts(self) -> list[str]:
        return sorted(str(p) for p in self.steps_dir.glob("part-*.parquet"))

    def steps_glob(self) -> str:
        return str(self.steps_dir / "part-*.parquet")

    @property
    def duckdb(self) -> Path:
        return self.root / "envsim.duckdb"
