"""A module that cannot be imported: plans naming code in it must say why."""

raise RuntimeError("this module reads a setting that is not there")
