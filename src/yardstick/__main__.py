"""`python -m yardstick`: the `yardstick` command."""

from yardstick.cli.entry import main

main()
