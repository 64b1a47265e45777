"""Matplotlib views, one module per topic. Every function takes ``ax=None``, draws and returns the axes.

Simulation modules never import this package; notebooks do.
"""
