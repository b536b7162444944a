"""recipe: a registry of tuned, versioned, validated distributed-training recipes."""

__version__ = "0.1.0"
