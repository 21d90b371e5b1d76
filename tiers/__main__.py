from tiers.cli import main

main()
