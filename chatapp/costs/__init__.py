"""Money: what each generation cost, and what a user may still spend.

The units gateways bill in, prices, costing and reconciling generations, spend and its live
push, spending limits, the ledger's retention, and their admin pages.
"""
