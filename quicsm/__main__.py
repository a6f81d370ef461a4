from quicsm.cli import main

main()
