"""The EnvSimBench reference format: its diff and scoring code reproduced (``reference``), export of a
split in its format (``export``) and import of its published data as a split version (``importer``)."""
