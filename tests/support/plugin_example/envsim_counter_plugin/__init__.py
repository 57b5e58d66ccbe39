"""An example envsim-forge plugin: the ``counter`` environment source and the ``echo`` simulator kind."""
