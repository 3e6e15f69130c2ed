"""Who a user is: single sign-on with an OpenID Connect provider, the sign-in page, self sign-up
with approval, the password change, and what a deactivation ends. What a user may do, and how
often, is `chatapp.access`."""
