"""The Hugging Face Hub connection (token from the environment or a Dagster secret)."""

import os

from dagster import ConfigurableResource
from pydantic import Field


class HuggingFaceHubResource(ConfigurableResource):
    """Where exports are pushed. The token is read from here or from $HF_TOKEN and never logged."""

    token: str | None = Field(default=None, description="Hub token; default: $HF_TOKEN. Use an EnvVar / secret.")
    endpoint: str | None = Field(default=None, description="Hub URL; default: $HF_ENDPOINT or huggingface.co.")
    private: bool = Field(default=True, description="Create new dataset repos as private.")

    def resolved_token(self) -> str | None:
        return self.token or os.environ.get("HF_TOKEN") or None

    def resolved_endpoint(self) -> str | None:
        return self.endpoint or os.environ.get("HF_ENDPOINT") or None
