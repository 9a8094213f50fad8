"""Shared test doubles and builders (never part of the product)."""
