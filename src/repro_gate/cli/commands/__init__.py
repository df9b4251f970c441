"""One module per `repro-gate` subcommand: `add_parser(subparsers, name)` registers it and
`run(args)` runs it (cli/main.py maps each name to both). `run` only turns the parsed arguments
into the parameters of a plain typed function named after the command."""
