"""Device kernels. Imported lazily: nothing here loads at ``import structgen``."""
