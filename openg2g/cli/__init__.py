"""The command-line interface (``openg2g``); see :mod:`openg2g.cli.main`."""
