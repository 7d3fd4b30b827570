"""The commands of the `pva` command line, one module each with register(subparsers)."""
