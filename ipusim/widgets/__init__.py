"""ipywidgets front ends, one module per topic: each wires controls to an ``ipusim.plots`` function
and returns the ``ipywidgets.interactive`` object (so plain pytest can set a value and check),
built with ``explorer.interactive`` so that an error in a callback shows as one line in the
explorer's output area instead of being swallowed.
"""
