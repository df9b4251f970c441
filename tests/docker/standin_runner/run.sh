#!/bin/sh
# Where the actions/runner image has its run.sh: the stand-in runner, in Python.
exec python3 /home/runner/standin_runner.py "$@"
