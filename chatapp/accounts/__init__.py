"""Accounts: single sign-on with an OpenID Connect provider, self sign-up with approval,
password change, and what a deactivation ends."""
