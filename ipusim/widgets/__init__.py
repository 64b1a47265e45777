"""ipywidgets front ends, one module per topic: each wires controls to an ``ipusim.plots`` function
and returns the ``ipywidgets.interactive`` object (so plain pytest can set a value and check).
"""
