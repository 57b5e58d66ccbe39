"""What people read (foundation tier, beside ``store``; imports only ``core``): Markdown tables, record lists and
histograms (``tables``) and line plots (``plots``) for asset metadata, dataset cards and the CLI report."""
