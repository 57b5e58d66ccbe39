"""α-curriculum SFT mixtures from evaluation results (GenEnv; docs/definitions.md §9)."""
