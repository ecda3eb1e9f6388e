"""Type stub of the native core (src/core/*.cpp, built by setup.py): its classes and functions
are typed as Any until the stub lists them."""
from typing import Any

def __getattr__(name: str) -> Any: ...
