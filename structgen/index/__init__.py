"""Token index: takes a Grammar and a tokenizer, gives the byte-level pushdown automaton and its per-state token masks."""
