"""The `jointrl` command line: the entry point and one module per subcommand; the jobs they run live in `jointrl.rl`."""
