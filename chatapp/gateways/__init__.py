"""The configured gateways and how the app reaches them.

Rows resolved to configs, one shared client per gateway and loop, the model catalog and the
prices it lists, the units a gateway bills in, keys at rest, and which models make images.
"""
