"""α-curriculum SFT mixtures from evaluation results (GenEnv; DESIGN §9)."""
