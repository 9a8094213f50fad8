"""Grid: an optimization-centric fleet model allocator."""

__version__ = "0.1.0"
