from yardstick.cli.entry import main

main()
