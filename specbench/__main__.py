from specbench.cli import main

main()
