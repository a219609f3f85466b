"""Physical planning for the in-process runtime: operator specs and the planner that builds them."""
