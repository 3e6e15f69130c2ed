"""Money: what each generation cost, and what a user may still spend.

Costing and reconciling generations, spend and its live push, spending limits, the ledger's
retention, and their admin pages; the units gateways bill in and their prices are `gateways`'.
"""
