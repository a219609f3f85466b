"""Binding: sqlglot query trees and DDL-free SELECTs -> logical plans, every name resolved and typed."""
