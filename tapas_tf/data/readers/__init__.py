"""Readers that turn data set releases (SQA, WikiTableQuestions) into Interaction protos."""
