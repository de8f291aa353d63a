"""The package's version, in a module of its own so that any layer can name it (a User-Agent, a
manifest, a thresholds file) without importing the package's public API."""

__version__ = "0.2.0.dev0"
