"""Errors raised before any model is started or any paid call is made."""


class InputError(ValueError):
    """Bad input data: names the file or dataset, the row and the column at fault."""


class ConfigError(ValueError):
    """A bad parameter or endpoint definition: names the parameter at fault."""
