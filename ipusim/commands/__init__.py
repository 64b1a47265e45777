"""Sub-commands of ``python -m ipusim``; one module each (see ``ipusim.cli``)."""
