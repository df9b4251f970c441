"""The per-slot Docker API proxy (docs/runner-proxy.md): each runner container reaches Docker
only through it, so a job cannot ask for another slot's GPU, a privileged container or a host
path outside its work folder.

    server.py     `serve(policy, listen, upstream)`: asyncio on a Unix socket
    framing.py    strict HTTP/1.1: request heads and bodies parsed, heads written
    relay.py      connections to the daemon; the raw relay after a validated 101
    routes.py     the endpoint allow-list; each request's target rebuilt
    bodies.py     the JSON fields each endpoint takes; bodies rebuilt from them
    policy.py     `SlotPolicy` and the rules on values
    ownership.py  the slot's containers (created or labelled); other slots' refused
    pins.py       bind sources pinned: opened beneath the work folder, bound where no job writes
    own_requests.py  the proxy's own requests to the daemon: an owner's inspect, a volume made
"""
