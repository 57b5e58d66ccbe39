"""The Hugging Face Hub connection (token from a Dagster secret, or whatever ``huggingface_hub`` resolves)."""

from dagster import ConfigurableResource
from pydantic import Field


class HuggingFaceHubResource(ConfigurableResource):
    """Where exports are pushed and the EnvSimBench release is fetched from. Unset fields are left to
    ``huggingface_hub``'s own resolution: the token from $HF_TOKEN or the ``hf auth login`` token file, the
    endpoint from $HF_ENDPOINT (else https://huggingface.co). The token is never logged."""

    token: str | None = Field(
        default=None,
        description="Hub token; default: huggingface_hub's ($HF_TOKEN, then the "
        "`hf auth login` token file). Use an EnvVar / secret.",
    )
    endpoint: str | None = Field(
        default=None, description="Hub URL; default: huggingface_hub's ($HF_ENDPOINT, else https://huggingface.co)."
    )
    private: bool = Field(default=True, description="Create new dataset repos as private.")
