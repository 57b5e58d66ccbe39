"""An example envsim-forge plugin: the ``counter`` environment adapter and source and the ``echo`` simulator kind."""
