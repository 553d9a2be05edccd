from yardstick.cli.main import main

main()
