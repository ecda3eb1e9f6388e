"""Runtime: takes grammars and a tokenizer, gives compiled grammars, matchers that track one output, and bitmasks."""
