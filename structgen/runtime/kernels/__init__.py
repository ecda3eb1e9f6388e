"""Device kernels: take logits and a bitmask on a GPU, mask the logits in place (Triton; imported only when used)."""
