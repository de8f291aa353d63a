"""Placeholder until written."""
