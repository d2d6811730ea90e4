from daydream.commands.cli import run

run()
