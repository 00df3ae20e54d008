"""Evaluation on BEIR-format collections."""
