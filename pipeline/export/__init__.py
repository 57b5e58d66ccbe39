"""Export: the simulator prompt protocol, SFT records, Hugging Face dataset layout and Hub push."""
