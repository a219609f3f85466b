"""Analysis of bound plans: window aggregates, state bounds, routing, backfill and sink targets."""
