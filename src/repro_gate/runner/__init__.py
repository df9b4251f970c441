"""The self-hosted GPU runner service (`repro-gate runner`).

`proxy/` is the per-slot Docker API proxy: each runner container reaches Docker only through
it, so a job cannot ask for another slot's GPU, a privileged container or a host path outside
its work folder. The rules are in `proxy/policy.py`; docs/runner-proxy.md lists them.
"""
