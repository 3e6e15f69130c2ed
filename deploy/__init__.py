"""Running the app as several processes: the loopback cluster (`make cluster`) and its parts.

`processes` is the process control every part shares (ports, readiness, stopping), `services`
the private PostgreSQL and Redis servers (the multi-process tests use them too), `nginx` the
proxy's configuration and process, `cluster` the orchestration. The files beside them (nginx
site, systemd units) are the same setup for real hosts, described in docs/deployment.md.
"""
