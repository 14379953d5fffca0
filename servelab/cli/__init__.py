"""The command-line interface: thin commands that parse, call the library, and render."""
