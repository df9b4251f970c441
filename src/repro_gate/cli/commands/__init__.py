"""One module per `repro-gate` subcommand: `add_parser(subparsers, name)` registers it."""
