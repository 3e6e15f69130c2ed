"""The configured gateways and how the app reaches them.

Rows resolved to configs, one shared client per gateway and loop, the model catalog, keys at
rest, and which models make images.
"""
