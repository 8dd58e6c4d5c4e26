"""The model file: the interpreter over it, its metadata, schemas and integrity checks."""
