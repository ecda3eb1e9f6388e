"""JSON Schema: takes a schema (text or value, with its resources), gives a Grammar of its canonical JSON instances."""
