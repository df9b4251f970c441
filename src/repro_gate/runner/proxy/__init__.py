"""The per-slot Docker API proxy (docs/runner-proxy.md): each runner container reaches Docker
only through it, so a job cannot ask for another slot's GPU, a privileged container or a host
path outside its work folder.

    server.py     `serve(policy, listen, upstream)`: asyncio on a Unix socket
    framing.py    HTTP/1.1 heads and bodies by their framing
    routes.py     the endpoint allow-list
    policy.py     `SlotPolicy` and the body rules
    ownership.py  the slot's label on what it creates; other slots' containers refused
"""
