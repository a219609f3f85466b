"""Logical plan nodes: what a query computes, with its schema, changelog mode and time attributes."""
