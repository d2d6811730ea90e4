"""The version of daydream, in one place: the package, the CLI and the build read it from here."""

__version__ = "0.1.0"
