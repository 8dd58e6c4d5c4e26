"""Adapting a model on the device: the protocol, the trainer, its cache, memory and reports."""
