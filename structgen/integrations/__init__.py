"""Integrations: takes a model and a compiled grammar, gives constrained generation (Hugging Face, own decode loop, vLLM)."""
