"""The exported test models replayed on the installed runtime (TF-free; ``pi``)."""
