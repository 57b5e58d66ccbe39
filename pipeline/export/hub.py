"""Push an export directory to the Hugging Face Hub (``huggingface_hub``), as one commit tagged with the split version.
The token comes from the caller (a Dagster secret) or, when it gives none, from ``huggingface_hub`` ($HF_TOKEN, the ``hf
auth login`` token file); likewise the endpoint ($HF_ENDPOINT). The token never appears in messages or metadata."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.export.hf_layout import MARKER


class PushError(RuntimeError):
    """The push failed; the local export is untouched and a retry resumes."""


@dataclass
class PushReport:
    repo_id: str
    revision: str
    files: list[tuple[str, int]] = field(default_factory=list)
    dry_run: bool = False
    commit: str | None = None
    url: str | None = None

    @property
    def bytes(self) -> int:
        return sum(size for _, size in self.files)


def push_export(
    directory: Path,
    repo_id: str,
    token: str | None,
    endpoint: str | None = None,
    private: bool = True,
    dry_run: bool = False,
) -> PushReport:
    """Create the dataset repo if needed, upload the export in one commit, tag it with the version."""
    marker = directory / MARKER
    if not marker.exists():
        raise PushError(f"{directory} is not an envsim export (no {MARKER}); export it first")
    version = json.loads(marker.read_text())["version"]
    kept = [p for p in directory.rglob("*") if p.is_file() and p.name != MARKER]
    files = sorted((str(p.relative_to(directory)), p.stat().st_size) for p in kept)
    report = PushReport(repo_id, version, files, dry_run)
    if dry_run:
        return report
    from huggingface_hub import HfApi, get_token
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

    token = token or get_token()
    if not token:
        raise PushError(
            "no Hugging Face token: set HF_TOKEN, log in with `hf auth login`, or set the hub resource's token"
        )

    api = HfApi(endpoint=endpoint, token=token)
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        try:
            api.repo_info(repo_id, repo_type="dataset")
        except RepositoryNotFoundError:
            raise PushError(f"{repo_id} exists on the Hub but is not a dataset repo (a model or space?)") from None
        commit = api.upload_folder(
            folder_path=str(directory),
            repo_id=repo_id,
            repo_type="dataset",
            commit_message=f"envsim export {version}",
            ignore_patterns=[MARKER],
        )
        api.create_tag(repo_id, tag=version, repo_type="dataset", revision=commit.oid, exist_ok=True)
    except PushError:
        raise
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        reason = {
            401: "the token was rejected (401)",
            403: "the token may not write to this repo (403)",
            409: "conflict (409): the repo or tag exists in an incompatible form",
        }.get(status, f"HTTP {status}")
        raise PushError(
            f"push of {version} to {repo_id} failed: {reason}; the local export is intact, retry to resume"
        ) from None
    except Exception as exc:  # network errors (httpx/OSError) and server protocol errors
        raise PushError(
            f"push of {version} to {repo_id} failed: network or protocol error ({type(exc).__name__}); "
            "the local export is intact, retry to resume"
        ) from None
    report.commit = commit.oid
    report.url = commit.commit_url
    return report
