"""Build of the native core (structgen._core); everything else is configured in pyproject.toml.

setuptools with a pybind11 extension: the packaging settings stay where they are, the only
build requirement beyond setuptools is pybind11 (header-only, from PyPI), and `pip install -e .`
builds the extension in place next to the package sources.
"""
from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup

setup(
    ext_modules=[
        Pybind11Extension(
            "structgen._core",
            ["src/core/token_walk.cpp", "src/core/automaton.cpp", "src/core/fa.cpp", "src/core/config_index.cpp",
             "src/core/names.cpp", "src/core/apply.cpp", "src/core/expr_plan.cpp"],
            cxx_std=17,
            extra_compile_args=["-O2"],
        )
    ],
    cmdclass={"build_ext": build_ext},
)
