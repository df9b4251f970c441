"""One module per `repro-gate` subcommand: `add_parser(subparsers, name)` registers it and
`run(args)` runs it (cli/main.py maps each name to both); the gate commands call a plain
function with typed parameters from `run`."""
