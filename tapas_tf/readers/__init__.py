"""Readers that turn data set releases into Interaction protos."""
