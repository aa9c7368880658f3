from ckpt_cli.cli import main

main()
